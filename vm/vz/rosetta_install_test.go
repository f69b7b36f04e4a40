package vz

import (
	"errors"
	"strings"
	"testing"
)

// scriptedRosetta plays the Mac: availability answers in turn (the last
// repeats), install records that it ran.
type scriptedRosetta struct {
	answers    []RosettaAvailability
	installErr error
	installed  bool
	asked      []string
}

func (s *scriptedRosetta) host() rosettaHost {
	return rosettaHost{
		availability: func() RosettaAvailability {
			a := s.answers[0]
			if len(s.answers) > 1 {
				s.answers = s.answers[1:]
			}
			return a
		},
		install: func() error { s.installed = true; return s.installErr },
	}
}

func (s *scriptedRosetta) confirm(answer bool, err error) func(string) (bool, error) {
	return func(q string) (bool, error) {
		s.asked = append(s.asked, q)
		return answer, err
	}
}

func TestOfferRosettaInstall(t *testing.T) {
	tests := []struct {
		name        string
		answers     []RosettaAvailability
		interactive bool
		yes         bool
		confirmErr  error
		installErr  error
		wantErr     string // substring; empty: success
		wantAsked   bool
		wantInstall bool
	}{
		{name: "installed: nothing to do", answers: []RosettaAvailability{RosettaInstalled}, interactive: true},
		{name: "unsupported", answers: []RosettaAvailability{RosettaUnsupported}, interactive: true, wantErr: "not supported on this Mac"},
		{name: "no terminal", answers: []RosettaAvailability{RosettaNotInstalled},
			wantErr: "Rosetta is not installed; run `softwareupdate --install-rosetta` or start from a terminal to be asked"},
		{name: "terminal, yes", answers: []RosettaAvailability{RosettaNotInstalled, RosettaInstalled}, interactive: true, yes: true,
			wantAsked: true, wantInstall: true},
		{name: "terminal, no", answers: []RosettaAvailability{RosettaNotInstalled}, interactive: true,
			wantErr: "install declined", wantAsked: true},
		{name: "terminal closed while asking", answers: []RosettaAvailability{RosettaNotInstalled}, interactive: true, confirmErr: errors.New("EOF"),
			wantErr: "ask whether to install Rosetta: EOF", wantAsked: true},
		{name: "install fails", answers: []RosettaAvailability{RosettaNotInstalled}, interactive: true, yes: true, installErr: errors.New("network error"),
			wantErr: "install Rosetta (or run `softwareupdate --install-rosetta`): network error", wantAsked: true, wantInstall: true},
		{name: "install claims success, vz disagrees", answers: []RosettaAvailability{RosettaNotInstalled}, interactive: true, yes: true,
			wantErr: "does not report Rosetta installed", wantAsked: true, wantInstall: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scriptedRosetta{answers: tt.answers, installErr: tt.installErr}
			err := s.host().offer(tt.interactive, s.confirm(tt.yes, tt.confirmErr))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("offer = %v, want success", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("offer = %v, want an error containing %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			if asked := len(s.asked) > 0; asked != tt.wantAsked {
				t.Errorf("asked = %v, want %v", s.asked, tt.wantAsked)
			}
			if s.installed != tt.wantInstall {
				t.Errorf("installed = %v, want %v", s.installed, tt.wantInstall)
			}
		})
	}
}

// A build without vz has nothing to offer; the driver explains instead.
func TestOfferRosettaInstallWithoutVZ(t *testing.T) {
	if err := (rosettaHost{}).offer(false, nil); err != nil {
		t.Errorf("offer = %v, want nil", err)
	}
}

func TestRosettaQuestionIsOneLine(t *testing.T) {
	if strings.Contains(strings.TrimSuffix(rosettaQuestion, " "), "\n") || !strings.HasSuffix(rosettaQuestion, "[y/N] ") {
		t.Errorf("question %q: want one line ending in [y/N]", rosettaQuestion)
	}
}
