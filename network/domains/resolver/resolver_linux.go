package resolver

import "context"

func add(ctx context.Context, r *Resolver) error    { return linux(ctx, r) }
func remove(ctx context.Context, r *Resolver) error { return linux(ctx, r) }
