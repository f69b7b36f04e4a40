package forward

import (
	"strings"
	"testing"
)

func TestParseRulesErrors(t *testing.T) {
	tests := []struct {
		name    string
		specs   []RuleSpec
		ignore  []string
		wantErr string // substring; empty means valid
	}{
		{"empty", nil, nil, ""},
		{"single", []RuleSpec{{Guest: "80", Host: "8080"}}, nil, ""},
		{"host defaults to guest", []RuleSpec{{Guest: "8080"}}, nil, ""},
		{"range", []RuleSpec{{Guest: "8000-8010", Host: "9000-9010", Proto: "TCP"}}, []string{"22", "6000-6010"}, ""},
		{"same guest port per proto", []RuleSpec{{Guest: "53", Host: "5353", Proto: "udp"}, {Guest: "53", Host: "5354", Proto: "tcp"}}, nil, ""},
		{"bad proto", []RuleSpec{{Guest: "80", Host: "8080", Proto: "sctp"}}, nil, `bad proto "sctp"`},
		{"port zero", []RuleSpec{{Guest: "0", Host: "8080"}}, nil, `bad port "0"`},
		{"port too big", []RuleSpec{{Guest: "80", Host: "70000"}}, nil, `bad port "70000"`},
		{"not a number", []RuleSpec{{Guest: "http", Host: "80"}}, nil, `bad port "http"`},
		{"reversed range", []RuleSpec{{Guest: "8010-8000", Host: "9000-9010"}}, nil, `bad port range "8010-8000"`},
		{"length mismatch", []RuleSpec{{Guest: "8000-8010", Host: "9000-9005"}}, nil, "differ in length"},
		{"guest overlap", []RuleSpec{{Guest: "8000-8010", Host: "9000-9010"}, {Guest: "8005", Host: "7000"}}, nil, "port rule 2: guest 8005 overlaps rule 1"},
		{"host overlap", []RuleSpec{{Guest: "80", Host: "8080"}, {Guest: "81", Host: "8080"}}, nil, "port rule 2: host 8080 overlaps rule 1"},
		{"overlap across both-proto rule", []RuleSpec{{Guest: "80", Host: "8080"}, {Guest: "80", Host: "8081", Proto: "udp"}}, nil, "overlaps"},
		{"bad ignore", nil, []string{"22", "x-y"}, `port ignore list: bad port "x-y"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRules(tt.specs, tt.ignore)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("no error, want %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q, want it to contain %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestRulesMap(t *testing.T) {
	rules, err := ParseRules([]RuleSpec{
		{Guest: "8000-8010", Host: "9000-9010"},
		{Guest: "80", Host: "8080", Proto: "tcp"},
		{Guest: "53", Host: "5353", Proto: "udp"},
	}, []string{"22", "1-1023", "6000-6010"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		proto  string
		guest  int
		want   int
		wantOK bool
	}{
		{"tcp", 8000, 9000, true},
		{"tcp", 8005, 9005, true},
		{"udp", 8010, 9010, true},
		{"tcp", 8011, 8011, true},
		{"tcp", 80, 8080, true}, // explicit map wins over the ignored 1-1023
		{"udp", 80, 0, false},   // the tcp-only map does not apply
		{"udp", 53, 5353, true},
		{"tcp", 53, 0, false},
		{"tcp", 22, 0, false},
		{"tcp", 6005, 0, false},
		{"tcp", 6011, 6011, true},
		{"tcp", 0, 0, false},
		{"tcp", 65536, 0, false},
	}
	for _, tt := range tests {
		got, ok := rules.Map(tt.proto, tt.guest)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Map(%s, %d) = %d, %v; want %d, %v", tt.proto, tt.guest, got, ok, tt.want, tt.wantOK)
		}
	}
	var none *Rules
	if got, ok := none.Map("tcp", 3000); got != 3000 || !ok {
		t.Errorf("nil Rules Map(tcp, 3000) = %d, %v; want 3000, true", got, ok)
	}
}
