package trust

import "context"

func add(ctx context.Context, t *Trust) error { return darwin(ctx, t) }
