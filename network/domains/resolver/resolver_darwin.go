package resolver

import "context"

func add(ctx context.Context, r *Resolver) error    { return darwinAdd(ctx, r) }
func remove(ctx context.Context, r *Resolver) error { return darwinRemove(ctx, r) }
