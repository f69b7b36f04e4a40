package domains

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func names(t *testing.T, tb *Table) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range tb.Routes() {
		out[r.Name] = r.Container
	}
	return out
}

func TestNamesFromContainerComposeAndLabel(t *testing.T) {
	c := Container{ID: "a", Name: "/My_App.1", IP: "172.17.0.2", Created: t0, Labels: map[string]string{
		LabelComposeProject: "Shop",
		LabelComposeService: "web_front",
		LabelDomains:        "api.vmdock.localhost, Admin_Panel.vmdock.localhost.",
	}}
	for _, tc := range []struct {
		profile string
		want    map[string]Source
	}{
		{"default", map[string]Source{
			"my-app-1.vmdock.localhost":       FromContainerName,
			"web-front.shop.vmdock.localhost": FromCompose,
			"api.vmdock.localhost":            FromLabel,
			"admin-panel.vmdock.localhost":    FromLabel,
		}},
		// a label claims names only in its own profile's zone
		{"Dev_2.x", map[string]Source{
			"my-app-1.dev-2-x.vmdock.localhost":       FromContainerName,
			"web-front.shop.dev-2-x.vmdock.localhost": FromCompose,
		}},
	} {
		got, probs := Names(tc.profile, c)
		wantProbs := 0
		if tc.profile != "default" {
			wantProbs = 2 // the label's two names, outside the zone
		}
		if len(probs) != wantProbs || wantProbs > 0 && !strings.Contains(probs[0], "accepted: full names ending in .dev-2-x.vmdock.localhost") {
			t.Errorf("%s: problems %v", tc.profile, probs)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: names %v, want %v", tc.profile, got, tc.want)
		}
		for n, s := range tc.want {
			if got[n] != s {
				t.Errorf("%s: %s source %v, want %v (all: %v)", tc.profile, n, got[n], s, got)
			}
		}
	}
}

func TestDomainsLabelRejectsNamesOutsideTheSuffix(t *testing.T) {
	c := Container{Name: "x", Labels: map[string]string{LabelDomains: "example.com,ok.vmdock.localhost,a..vmdock.localhost"}}
	got, probs := Names("default", c)
	if got["ok.vmdock.localhost"] != FromLabel {
		t.Errorf("names %v lack ok.vmdock.localhost", got)
	}
	if len(probs) != 2 || !strings.Contains(probs[0], `"example.com"`) || !strings.Contains(probs[0], "accepted") {
		t.Errorf("problems %q, want two naming the bad values and what is accepted", probs)
	}
}

func TestTargetPort(t *testing.T) {
	for _, tc := range []struct {
		name    string
		labels  map[string]string
		exposed []int
		port    int
		problem string
	}{
		{"label wins", map[string]string{LabelHTTPPort: "3000"}, []int{80, 443}, 3000, ""},
		{"single exposed", nil, []int{8080}, 8080, ""},
		{"same port twice", nil, []int{8080, 8080}, 8080, ""},
		{"none exposed", nil, nil, 80, ""},
		{"several exposed", nil, []int{9000, 80}, 0, "several TCP ports (80, 9000)"},
		{"bad label", map[string]string{LabelHTTPPort: "http"}, nil, 0, `"http" is not accepted`},
		{"label out of range", map[string]string{LabelHTTPPort: "70000"}, nil, 0, "1-65535"},
		{"single web port", nil, []int{5173}, 5173, ""},
		{"single port that is no web port", nil, []int{11211}, 0, "port 11211, which vmdock does not route to unless the label dev.vmdock.http-port=11211 says so"},
		{"label for a port that is no web port", map[string]string{LabelHTTPPort: "11211"}, []int{11211}, 11211, ""},
	} {
		port, problem := Target(Container{Name: "c", Labels: tc.labels, Exposed: tc.exposed})
		if port != tc.port || (tc.problem == "") != (problem == "") || !strings.Contains(problem, tc.problem) {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, port, problem, tc.port, tc.problem)
		}
	}
}

func TestBuildRoutesAndProblems(t *testing.T) {
	tb := Build("default", []Container{
		{ID: "1", Name: "web", IP: "172.17.0.2", Exposed: []int{8080}},
		{ID: "2", Name: "multi", IP: "172.17.0.3", Exposed: []int{80, 443}},
		{ID: "3", Name: "isolated", Exposed: []int{80}},
	})
	r, ok := tb.Lookup("WEB.vmdock.localhost.:8443")
	if !ok || r.Addr != "172.17.0.2:8080" || r.Port != 8080 || r.Problem != "" {
		t.Errorf("web: %+v %v", r, ok)
	}
	if r, _ := tb.Lookup("multi.vmdock.localhost"); r.Addr != "" || !strings.Contains(r.Problem, "80, 443") {
		t.Errorf("multi: %+v, want a problem listing 80 and 443", r)
	}
	if r, _ := tb.Lookup("isolated.vmdock.localhost"); r.Addr != "" || !strings.Contains(r.Problem, "no IP address") {
		t.Errorf("isolated: %+v, want a no-address problem", r)
	}
	if _, ok := tb.Lookup("nope.vmdock.localhost"); ok {
		t.Error("an unknown name was found")
	}
}

func TestPrecedenceAndConflicts(t *testing.T) {
	tb := Build("default", []Container{
		// "web" by container name, older and newer
		{ID: "old", Name: "web", IP: "10.0.0.1", Created: t0},
		{ID: "new", Name: "web", IP: "10.0.0.2", Created: t0.Add(time.Hour)},
		// a label takes a name from a newer container named "api"
		{ID: "labelled", Name: "backend", IP: "10.0.0.4", Created: t0, Labels: map[string]string{LabelDomains: "api.vmdock.localhost"}},
		{ID: "api", Name: "api", IP: "10.0.0.5", Created: t0.Add(time.Hour)},
	})
	want := map[string]string{
		"web.vmdock.localhost": "web",
		"api.vmdock.localhost": "backend", // label beats the newer container name
	}
	got := names(t, tb)
	for n, c := range want {
		if got[n] != c {
			t.Errorf("%s → %q, want %q", n, got[n], c)
		}
	}
	if r, _ := tb.Lookup("web.vmdock.localhost"); r.ContainerID != "new" {
		t.Errorf("web → %s, want the newer container", r.ContainerID)
	}
	cs := tb.Conflicts()
	if len(cs) != 2 || cs[0].Name != "api.vmdock.localhost" || cs[1].Name != "web.vmdock.localhost" ||
		cs[0].Losers[0].Container != "api" || cs[1].Losers[0].ContainerID != "old" {
		t.Errorf("conflicts %+v", cs)
	}
}

func TestNewestAmongEquals(t *testing.T) {
	tb := Build("default", []Container{
		{ID: "a", Name: "one", IP: "10.0.0.1", Created: t0, Labels: map[string]string{LabelDomains: "app.vmdock.localhost"}},
		{ID: "b", Name: "two", IP: "10.0.0.2", Created: t0.Add(time.Minute), Labels: map[string]string{LabelDomains: "app.vmdock.localhost"}},
	})
	if r, _ := tb.Lookup("app.vmdock.localhost"); r.Container != "two" {
		t.Errorf("app → %s, want the newer container two", r.Container)
	}
}

func TestMergeResolvesAcrossProfiles(t *testing.T) {
	a := Build("default", []Container{{ID: "a", Name: "web", IP: "10.0.0.1", Created: t0, Labels: map[string]string{LabelDomains: "shared.vmdock.localhost"}}})
	// dev's label for a name outside dev's zone claims nothing
	b := Build("dev", []Container{{ID: "b", Name: "web", IP: "10.0.0.1", Created: t0.Add(time.Second), Labels: map[string]string{LabelDomains: "shared.vmdock.localhost"}}})
	// the compose service web of project x in the default profile and the
	// container web of profile x claim one name: it is in x's zone, so x's
	c := Build("default", []Container{{ID: "c", Name: "x-web-1", IP: "10.0.0.3", Created: t0, Labels: map[string]string{LabelComposeProject: "x", LabelComposeService: "web"}}})
	d := Build("x", []Container{{ID: "d", Name: "web", IP: "10.0.0.4", Created: t0.Add(time.Hour)}})
	m := Merge(a, b, c, d)
	got := map[string]string{}
	for _, r := range m.Routes() {
		got[r.Name] = r.Profile
	}
	if got["web.vmdock.localhost"] != "default" || got["web.dev.vmdock.localhost"] != "dev" || got["shared.vmdock.localhost"] != "default" {
		t.Errorf("merged %v", got)
	}
	if r, _ := m.Lookup("web.x.vmdock.localhost"); r.ContainerID != "d" || r.Profile != "x" {
		t.Errorf("web.x → %+v, want profile x's container d", r)
	}
	if cs := m.Conflicts(); len(cs) != 0 {
		t.Errorf("conflicts %+v, want none: each name is claimed in its own zone only", m.Conflicts())
	}
	// two profiles' labels for one name in the default zone: resolved by
	// the usual rules, the newer wins
	e := Build("default", []Container{{ID: "e", Name: "old", IP: "10.0.0.5", Created: t0.Add(time.Hour), Labels: map[string]string{LabelDomains: "shared.vmdock.localhost"}}})
	if r, _ := Merge(a, e).Lookup("shared.vmdock.localhost"); r.ContainerID != "e" {
		t.Errorf("shared → %+v, want the newer container e", r)
	}
}

func TestUnder(t *testing.T) {
	for n, want := range map[string]bool{"vmdock.localhost": true, "a.b.vmdock.localhost:443": true, "example.com": false, "evilvmdock.localhost": false} {
		if Under(n) != want {
			t.Errorf("Under(%q) = %v", n, !want)
		}
	}
}

// A profile's label may claim names in its zone only; the default
// profile's zone leaves out the zones of the other profiles running, so
// neither its labels nor its compose projects take their names.
func TestNamesStayInTheirProfilesZone(t *testing.T) {
	dev := Build("dev", []Container{
		{ID: "d1", Name: "web", IP: "10.0.1.2", Created: t0},
		{ID: "d2", Name: "api", IP: "10.0.1.3", Created: t0, Labels: map[string]string{LabelDomains: "shop.dev.vmdock.localhost,bank.vmdock.localhost"}},
	})
	def := Build("default", []Container{
		{ID: "x1", Name: "thief", IP: "10.0.0.2", Created: t0.Add(time.Hour), Labels: map[string]string{LabelDomains: "web.dev.vmdock.localhost,mine.vmdock.localhost"}},
		{ID: "x2", Name: "svc", IP: "10.0.0.3", Created: t0.Add(time.Hour), Labels: map[string]string{LabelComposeProject: "dev", LabelComposeService: "api"}},
	})
	got := names(t, Merge(dev, def))
	want := map[string]string{
		"web.dev.vmdock.localhost":  "web",
		"api.dev.vmdock.localhost":  "api",
		"shop.dev.vmdock.localhost": "api",
		"mine.vmdock.localhost":     "thief",
		"thief.vmdock.localhost":    "thief",
		"svc.vmdock.localhost":      "svc",
	}
	for n, c := range want {
		if got[n] != c {
			t.Errorf("%s -> %q, want %q", n, got[n], c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("names %v, want only %v", got, want)
	}
	probs := strings.Join(Merge(dev, def).Problems, "\n")
	for _, p := range []string{"bank.vmdock.localhost", "web.dev.vmdock.localhost", "api.dev.vmdock.localhost"} {
		if !strings.Contains(probs, p) {
			t.Errorf("problems %q do not name %s", probs, p)
		}
	}
	// without profile dev running, the default profile may use those names
	if got := names(t, Merge(def)); got["web.dev.vmdock.localhost"] != "thief" || got["api.dev.vmdock.localhost"] != "svc" {
		t.Errorf("default alone: %v", got)
	}
}
