package vz

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
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
		install: func(context.Context) error { s.installed = true; return s.installErr },
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
			wantErr: "install Rosetta: network error", wantAsked: true, wantInstall: true},
		{name: "install claims success, vz disagrees", answers: []RosettaAvailability{RosettaNotInstalled}, interactive: true, yes: true,
			wantErr: "does not report Rosetta installed", wantAsked: true, wantInstall: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scriptedRosetta{answers: tt.answers, installErr: tt.installErr}
			err := s.host().offer(context.Background(), tt.interactive, s.confirm(tt.yes, tt.confirmErr))
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
	if err := (rosettaHost{}).offer(context.Background(), false, nil); err != nil {
		t.Errorf("offer = %v, want nil", err)
	}
}

func TestRosettaQuestionIsOneLine(t *testing.T) {
	if strings.Contains(strings.TrimSuffix(rosettaQuestion, " "), "\n") || !strings.HasSuffix(rosettaQuestion, "[y/N] ") {
		t.Errorf("question %q: want one line ending in [y/N]", rosettaQuestion)
	}
}

// fakeSoftwareUpdate plays softwareupdate: it records the command line and
// answers with out and err, or, when hang is set, runs until its context ends.
type fakeSoftwareUpdate struct {
	hang bool
	out  string
	err  error
	ran  []string
}

func (f *fakeSoftwareUpdate) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	f.ran = append([]string{name}, args...)
	if f.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []byte(f.out), f.err
}

func TestSoftwareUpdateInstallsRosettaWithTheLicenseAgreed(t *testing.T) {
	f := &fakeSoftwareUpdate{out: "Install of Rosetta 2 finished successfully\n"}
	if err := (softwareUpdate{run: f.run, timeout: time.Minute}).install(context.Background()); err != nil {
		t.Fatalf("install = %v", err)
	}
	want := "/usr/sbin/softwareupdate --install-rosetta --agree-to-license"
	if got := strings.Join(f.ran, " "); got != want {
		t.Errorf("ran %q, want %q", got, want)
	}
}

func TestSoftwareUpdateFailureNamesItsReason(t *testing.T) {
	f := &fakeSoftwareUpdate{out: "By using the agreetolicense option...\nPackage Authoring Error: 062-01890: Package reference com.apple.pkg.RosettaUpdateAuto is missing installKBytes attribute\n", err: errors.New("exit status 1")}
	err := (softwareUpdate{run: f.run, timeout: time.Minute}).install(context.Background())
	if err == nil || !strings.Contains(err.Error(), "exit status 1: Package Authoring Error") || strings.Contains(err.Error(), "\n") {
		t.Errorf("install = %v, want one line with softwareupdate's last line", err)
	}
}

// A stuck installer ends at the timeout with an error that says so,
// instead of holding the start forever.
func TestSoftwareUpdateTimesOut(t *testing.T) {
	f := &fakeSoftwareUpdate{hang: true}
	err := (softwareUpdate{run: f.run, timeout: 20 * time.Millisecond}).install(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not finish within 20ms") {
		t.Errorf("install = %v, want the timeout named", err)
	}
}

// The real runner kills the program at the deadline: a hanging installer
// cannot outlive it.
func TestRunCombinedStopsAtTheDeadline(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep program")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := runCombined(ctx, sleep, "30"); err == nil {
		t.Error("runCombined of a killed program returned no error")
	}
	if waited := time.Since(start); waited > 20*time.Second {
		t.Errorf("runCombined returned after %s, want about the 50ms deadline", waited)
	}
}
