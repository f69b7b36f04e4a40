package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmdock/vmdock/network/domains"
	"github.com/vmdock/vmdock/network/domains/dockerapi"
	"github.com/vmdock/vmdock/network/domains/localca"
	"github.com/vmdock/vmdock/network/domains/resolver"
	"github.com/vmdock/vmdock/network/domains/trust"
	"github.com/vmdock/vmdock/vm/config"
	"github.com/vmdock/vmdock/vm/store"
)

// trustAdder is what `domains trust` needs of package trust; a variable
// so CLI tests never run sudo or touch a real trust store.
type trustAdder interface{ Add(context.Context) error }

var newTrust = func(certPath string, out io.Writer) (trustAdder, error) { return trust.New(certPath, out) }

// domainsList is `vmdock domains --json`.
type domainsList = domains.Listing

func newDomainsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "domains",
		Short: "List the containers' names under " + domains.Suffix,
		Long: "Every running container has a name: <container>." + domains.Suffix + ", <service>.<project>." + domains.Suffix + "\n" +
			"for compose services, and the names in its " + domains.LabelDomains + " label; a profile other than default\n" +
			"adds its name: <container>.<profile>." + domains.Suffix + ". The target port is the " + domains.LabelHTTPPort + " label,\n" +
			"else the one exposed TCP port, else 80. This lists every running profile's names, with conflicts.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := listDomains(cmd.Context(), g.host)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(l)
			}
			printDomains(cmd.OutOrStdout(), l)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(newDomainsResolverCmd(g))
	cmd.AddCommand(
		&cobra.Command{
			Use:   "ca",
			Short: "Print the path of the CA certificate (PEM) behind https://<name>." + domains.Suffix + ", making the CA on first use",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ca, err := openCA()
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), ca.CertPath())
				return nil
			},
		},
		&cobra.Command{
			Use:   "trust",
			Short: "Add the CA to this host's trust stores (uses sudo)",
			Long: "macOS: the System keychain. Linux: the system CA folder with update-ca-certificates (or update-ca-trust),\n" +
				"and your NSS database (~/.pki/nssdb, read by Chromium and Firefox) with certutil. Commands that need root\n" +
				"run through sudo, each printed first. The CA can sign only names under " + domains.Suffix + " (an X.509 name\n" +
				"constraint), so trusting it trusts nothing else. Env " + trust.SystemDirEnv + " and " + trust.NSSDBEnv + " move the stores.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ca, err := openCA()
				if err != nil {
					return err
				}
				t, err := newTrust(ca.CertPath(), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				return t.Add(cmd.Context())
			},
		},
	)
	return cmd
}

func openCA() (*localca.CA, error) {
	home, err := store.Home()
	if err != nil {
		return nil, err
	}
	return localca.Open(home)
}

// listDomains asks the router for the names it serves; with no router
// running (domains disabled, or no port could be had) it reads every
// running profile's containers from its docker socket and resolves them
// as the router would.
func listDomains(ctx context.Context, h config.Host) (domainsList, error) {
	home, err := store.Home()
	if err != nil {
		return domainsList{}, err
	}
	if l, err := askRouter(ctx, filepath.Join(home, domains.SocketName)); err == nil {
		return l, nil
	}
	l := domainsList{Skipped: map[string]string{}}
	insts, err := store.List(home)
	if err != nil {
		return l, err
	}
	var tables []*domains.Table
	for _, inst := range insts {
		if cfg, err := inst.LoadConfig(h); err == nil && cfg.Runtime == config.RuntimeContainerd {
			if _, err := os.Stat(inst.ContainerdSocketPath()); err == nil {
				// its names come from nerdctl in the guest, which only
				// the profile's host agent runs
				l.Skipped[inst.Name] = "containerd runtime: its names are listed only by a running router (domains.enabled false, or the router could not have its ports)"
			}
			continue
		}
		sock := inst.DockerSocketPath()
		if _, err := os.Stat(sock); errors.Is(err, fs.ErrNotExist) {
			continue // not running
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cs, err := dockerapi.Unix(sock).Containers(cctx)
		cancel()
		if err != nil {
			l.Skipped[inst.Name] = err.Error()
			continue
		}
		tables = append(tables, domains.Build(inst.Name, cs))
	}
	skipped := l.Skipped
	l = domains.Merge(tables...).Listing()
	l.Skipped = skipped
	return l, nil
}

// askRouter gets the listing from the host agent that owns the router's
// ports (the request is vm/hostagent's hello with list set).
func askRouter(ctx context.Context, sock string) (domainsList, error) {
	var l domainsList
	c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "unix", sock)
	if err != nil {
		return l, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck
	if _, err := io.WriteString(c, `{"list":true}`+"\n"); err != nil {
		return l, err
	}
	if err := json.NewDecoder(c).Decode(&l); err != nil {
		return l, fmt.Errorf("the router at %s: %w", sock, err)
	}
	return l, nil
}

func printDomains(w io.Writer, l domainsList) {
	if len(l.Listening) > 0 {
		fmt.Fprintf(w, "router: %s\n", strings.Join(l.Listening, ", "))
	} else {
		fmt.Fprintln(w, "no router is running (domains.enabled false, or it got no port: see `vmdock start`); names from the docker sockets:")
	}
	if len(l.Routes) == 0 {
		fmt.Fprintln(w, "no container names: no running profile has a running container")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tPROFILE\tCONTAINER\tPORT\tFROM")
		for _, r := range l.Routes {
			port := strconv.Itoa(r.Port)
			if r.Problem != "" {
				port = "- (" + r.Problem + ")"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Profile, r.Container, port, r.Source)
		}
		tw.Flush()
	}
	for _, c := range l.Conflicts {
		var losers []string
		for _, r := range c.Losers {
			losers = append(losers, fmt.Sprintf("%s (%s, profile %s)", r.Container, r.Source, r.Profile))
		}
		fmt.Fprintf(w, "conflict: %s goes to %s (%s, profile %s), not %s\n", c.Name, c.Winner.Container, c.Winner.Source, c.Winner.Profile, strings.Join(losers, ", "))
	}
	for _, p := range l.Problems {
		fmt.Fprintln(w, "problem: "+p)
	}
	for _, p := range slices.Sorted(maps.Keys(l.Skipped)) {
		fmt.Fprintf(w, "profile %s skipped: %s\n", p, l.Skipped[p])
	}
}

func newDomainsResolverCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resolver",
		Short: "Send the system resolver's *." + domains.Suffix + " queries to vmdock (macOS; uses sudo)",
		Long: "Browsers and curl resolve *.localhost themselves; Safari, Python and other clients of the system resolver\n" +
			"do not. On macOS `add` writes /etc/resolver/" + domains.Suffix + " (through sudo, printing each command),\n" +
			"pointing at the DNS responder the router's host agent runs on 127.0.0.1 port domains.dnsPort; it answers\n" +
			"only names under " + domains.Suffix + ". On Linux nothing is needed (systemd-resolved or nss-myhostname).\n" +
			"Env " + resolver.DirEnv + " moves /etc/resolver.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	for _, action := range []string{"add", "remove"} {
		cmd.AddCommand(&cobra.Command{
			Use:   action,
			Short: map[string]string{"add": "Write the resolver entry", "remove": "Remove the resolver entry vmdock wrote"}[action],
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				port := config.DefaultDomainsDNSPort
				if inst, err := g.existing(); err == nil {
					cfg, err := inst.LoadConfig(g.host)
					if err != nil {
						return err
					}
					port = cfg.Domains.DNSPort
				}
				r := &resolver.Resolver{
					Port: port, Out: cmd.ErrOrStderr(), Run: resolver.Runner(trust.ExecRunner(cmd.ErrOrStderr())),
					Getenv: os.Getenv, Root: os.Geteuid() == 0,
				}
				if action == "add" {
					return r.Add(cmd.Context())
				}
				return r.Remove(cmd.Context())
			},
		})
	}
	return cmd
}
