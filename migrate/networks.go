package migrate

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
)

// network is GET /networks/{name}'s answer, as far as creating it again
// needs.
type network struct {
	Name       string
	Driver     string
	Internal   bool
	Attachable bool
	EnableIPv6 bool
	Options    map[string]string
	Labels     map[string]string
	IPAM       struct {
		Driver  string
		Options map[string]string
		Config  []map[string]string
	}
}

// ensureNetwork creates the user-defined network n on the target as it is
// on the source, with its subnets when no target network holds them (else
// the engine picks, and the item says so).
func (r *run) ensureNetwork(ctx context.Context, n string) error {
	if builtinNetworks[n] || r.nets[n] != "" {
		return nil
	}
	var existing network
	err := r.opts.Target.Call(ctx, http.MethodGet, "/networks/"+url.PathEscape(n), nil, nil, &existing)
	if err == nil {
		r.nets[n] = Present
		return nil
	}
	if !isNotFound(err) {
		return fmt.Errorf("look up network %s on the target: %w", n, err)
	}
	var src network
	if err := r.opts.Source.Call(ctx, http.MethodGet, "/networks/"+url.PathEscape(n), nil, nil, &src); err != nil {
		return fmt.Errorf("inspect network %s on the source: %w", n, err)
	}
	taken, err := targetSubnets(ctx, r.opts.Target)
	if err != nil {
		return err
	}
	it := Item{Kind: "network", Name: n, Result: Copied}
	ipamConfig := src.IPAM.Config
	if subnetsClash(ipamConfig, taken) {
		ipamConfig = nil
		it.Detail = "its subnet is taken on the target: the engine picked another"
	}
	body := map[string]any{
		"Name": n, "Driver": src.Driver, "Internal": src.Internal, "Attachable": src.Attachable,
		"EnableIPv6": src.EnableIPv6, "Options": src.Options, "Labels": src.Labels, "CheckDuplicate": true,
		"IPAM": map[string]any{"Driver": src.IPAM.Driver, "Options": src.IPAM.Options, "Config": ipamConfig},
	}
	if err := r.opts.Target.Call(ctx, http.MethodPost, "/networks/create", nil, body, nil); err != nil {
		return fmt.Errorf("create network %s on the target: %w", n, err)
	}
	r.nets[n] = Copied
	r.done(it, 0, 0)
	return nil
}

// targetSubnets are the subnets of every network on e.
func targetSubnets(ctx context.Context, e *Engine) ([]netip.Prefix, error) {
	var list []network
	if err := e.Call(ctx, http.MethodGet, "/networks", nil, nil, &list); err != nil {
		return nil, fmt.Errorf("list networks on the target: %w", err)
	}
	var out []netip.Prefix
	for _, n := range list {
		for _, c := range n.IPAM.Config {
			if p, err := netip.ParsePrefix(c["Subnet"]); err == nil {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// subnetsClash reports whether a subnet of config overlaps one of taken.
func subnetsClash(config []map[string]string, taken []netip.Prefix) bool {
	for _, c := range config {
		p, err := netip.ParsePrefix(c["Subnet"])
		if err != nil {
			continue
		}
		for _, t := range taken {
			if p.Overlaps(t) {
				return true
			}
		}
	}
	return false
}
