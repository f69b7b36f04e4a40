// Package ci holds what the GitHub workflows run (.github/workflows), as
// scripts so no logic lives only in YAML, and the tests that check them on
// Linux: the Homebrew formula against a stub Formula class (Ruby), the
// formula rewrite a release does, and the image base URL a source build at
// a tag derives. It also holds .ci/run's phase bookkeeping (phases.sh: each
// phase's time, log and boots) and its test, the test that runs the
// release workflows' Linux jobs here (hack/ci/workflow), and the check of
// the dependencies' licenses. The workflows themselves are also checked by
// actionlint in `make lint`.
package ci
