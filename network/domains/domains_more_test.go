package domains

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"
)

func TestWithoutInheritedDropsOnlyTheImagesValues(t *testing.T) {
	for _, tc := range []struct {
		name          string
		labels, image map[string]string
		want          map[string]string
	}{
		{"no image labels", map[string]string{LabelDomains: "a.vmdock.localhost", "x": "1"}, nil,
			map[string]string{LabelDomains: "a.vmdock.localhost", "x": "1"}},
		{"both inherited", map[string]string{LabelDomains: "a.vmdock.localhost", LabelHTTPPort: "8080", "x": "1"},
			map[string]string{LabelDomains: "a.vmdock.localhost", LabelHTTPPort: "8080", "x": "1"},
			map[string]string{"x": "1"}},
		{"container overrides the image's port", map[string]string{LabelDomains: "a.vmdock.localhost", LabelHTTPPort: "3000"},
			map[string]string{LabelDomains: "a.vmdock.localhost", LabelHTTPPort: "8080"},
			map[string]string{LabelHTTPPort: "3000"}},
		{"other labels of the image stay", map[string]string{LabelComposeService: "web", "maintainer": "me"},
			map[string]string{LabelComposeService: "web", "maintainer": "me"},
			map[string]string{LabelComposeService: "web", "maintainer": "me"}},
		{"image label the container lacks", map[string]string{"x": "1"}, map[string]string{LabelDomains: "a.vmdock.localhost"},
			map[string]string{"x": "1"}},
	} {
		before := maps.Clone(tc.labels)
		got := WithoutInherited(tc.labels, tc.image)
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		if !maps.Equal(tc.labels, before) {
			t.Errorf("%s: the caller's labels changed to %v", tc.name, tc.labels)
		}
	}
}

func TestHasOwnLabels(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{nil, false},
		{map[string]string{LabelComposeProject: "p", LabelComposeService: "s"}, false},
		{map[string]string{LabelDomains: ""}, true},
		{map[string]string{LabelHTTPPort: "80"}, true},
	} {
		if got := HasOwnLabels(tc.labels); got != tc.want {
			t.Errorf("HasOwnLabels(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

func TestSourceTextRoundTrip(t *testing.T) {
	for _, s := range []Source{FromContainerName, FromCompose, FromLabel} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back Source = -1
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Errorf("%s: %s read back as %v (%v)", s, b, back, err)
		}
	}
	if b, _ := json.Marshal(FromCompose); string(b) != `"compose"` {
		t.Errorf("FromCompose marshals to %s, want \"compose\"", b)
	}
	var s Source
	err := s.UnmarshalText([]byte("dns"))
	if err == nil || !strings.Contains(err.Error(), `"dns"`) || !strings.Contains(err.Error(), "accepted: container, compose, label") {
		t.Errorf("bad source: err %v, want one naming the value and the accepted ones", err)
	}
}

func TestCheckHostName(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"web.vmdock.localhost", true},
		{"my-app-1.dev-2.vmdock.localhost", true},
		{long + ".vmdock.localhost", true},
		{strings.Repeat(long+".", 3) + strings.Repeat("a", 61), true}, // 253
		{"", false},
		{strings.Repeat(long+".", 3) + strings.Repeat("a", 62), false}, // 254
		{long + "a.vmdock.localhost", false},
		{"a..vmdock.localhost", false},
		{".vmdock.localhost", false},
		{"Web.vmdock.localhost", false},
		{"my_app.vmdock.localhost", false},
		{"a b.vmdock.localhost", false},
		{"é.vmdock.localhost", false},
		{"web.vmdock.localhost\x00", false},
	} {
		err := CheckHostName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckHostName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "accepted: DNS names") {
			t.Errorf("CheckHostName(%q): %v does not say what is accepted", tc.name, err)
		}
	}
}

func TestNilTableIsEmpty(t *testing.T) {
	var tb *Table
	if _, ok := tb.Lookup("web.vmdock.localhost"); ok {
		t.Error("a nil table found a name")
	}
	if tb.Routes() != nil || tb.Conflicts() != nil {
		t.Errorf("nil table: routes %v conflicts %v", tb.Routes(), tb.Conflicts())
	}
	b, err := json.Marshal(tb.Listing())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"routes":[],"conflicts":[],"problems":[]}`; string(b) != want {
		t.Errorf("nil table listing %s, want %s", b, want)
	}
}

func TestListingCarriesRoutesConflictsAndProblems(t *testing.T) {
	tb := Build("", []Container{
		{ID: "1", Name: "web", IP: "10.0.0.1", Created: t0},
		{ID: "2", Name: "web", IP: "10.0.0.2", Created: t0},
		{ID: "3", Name: "bad", IP: "10.0.0.3", Labels: map[string]string{LabelDomains: "example.com"}},
	})
	l := tb.Listing()
	if len(l.Routes) != 2 || l.Routes[0].Name != "bad.vmdock.localhost" || l.Routes[1].Name != "web.vmdock.localhost" {
		t.Errorf("routes %+v", l.Routes)
	}
	if l.Routes[1].Profile != DefaultProfile {
		t.Errorf("profile %q for an unnamed profile, want %q", l.Routes[1].Profile, DefaultProfile)
	}
	if len(l.Conflicts) != 1 || l.Conflicts[0].Winner.ContainerID != "1" || l.Conflicts[0].Losers[0].ContainerID != "2" {
		t.Errorf("conflicts %+v, want 1 over 2 (same age: lower ID)", l.Conflicts)
	}
	if len(l.Problems) != 1 || !strings.Contains(l.Problems[0], "example.com") {
		t.Errorf("problems %q", l.Problems)
	}
}

// Two profiles' claims of one name, of the same source and age: the
// profile that sorts first wins, whatever order the tables come in.
func TestWinsBreaksTiesByProfileThenID(t *testing.T) {
	label := map[string]string{LabelDomains: "shared.vmdock.localhost"}
	a := Build("default", []Container{{ID: "z", Name: "a", IP: "10.0.0.1", Created: t0, Labels: label}})
	b := Build("default", []Container{{ID: "y", Name: "b", IP: "10.0.0.2", Created: t0, Labels: label}})
	for _, m := range []*Table{Merge(a, b), Merge(b, a)} {
		if r, _ := m.Lookup("shared.vmdock.localhost"); r.ContainerID != "y" {
			t.Errorf("shared -> %s, want y (the lower ID)", r.ContainerID)
		}
	}
	for _, tc := range []struct {
		a, b Route
		want bool
	}{
		{Route{Source: FromLabel}, Route{Source: FromCompose, created: t0.Add(time.Hour)}, true},
		{Route{Source: FromContainerName, created: t0}, Route{Source: FromContainerName, created: t0.Add(time.Second)}, false},
		{Route{Profile: "alpha", ContainerID: "z"}, Route{Profile: "beta", ContainerID: "a"}, true},
		{Route{Profile: "beta", ContainerID: "a"}, Route{Profile: "alpha", ContainerID: "z"}, false},
		{Route{Profile: "p", ContainerID: "a"}, Route{Profile: "p", ContainerID: "b"}, true},
		{Route{Profile: "p", ContainerID: "b"}, Route{Profile: "p", ContainerID: "a"}, false},
	} {
		if got := wins(tc.a, tc.b); got != tc.want {
			t.Errorf("wins(%+v, %+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
