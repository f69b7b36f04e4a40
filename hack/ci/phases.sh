# The phase bookkeeping .ci/run sources: each phase's time, its log in
# $logs/NAME.log, the boots an e2e phase ran, and the table printed at the
# end (also when a phase fails). Kept apart from .ci/run so a test
# (hack/ci) can run it on phases that take a moment.
#
# Needs $logs (an existing folder) and $ci_start (the run's start, epoch
# seconds) set before a phase runs.

# Phase rows in order: "NAME SECONDS" once done, "NAME running" before.
timings=()
# Each phase runs in its own cgroup of the unified (v2) hierarchy, whether
# the machine mounts it at /sys/fs/cgroup or beside v1's controllers, so
# its CPU-seconds count every process it started: the host agents, which
# leave their session, and their QEMUs included. Where none can be made
# (no cgroup2 mount, no permission) the column says -.
ci_cgroups=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts 2>/dev/null || true)
[ -n "$ci_cgroups" ] && ci_cgroups=$ci_cgroups/vmdock-ci-$$
cpu_join() { # cpu_join NAME: this shell, and what it starts, into NAME's cgroup
  [ -n "$ci_cgroups" ] || return 0
  { mkdir -p "$ci_cgroups/$1" && echo "$BASHPID" >"$ci_cgroups/$1/cgroup.procs"; } 2>/dev/null || true
}
cpu_seconds() { # cpu_seconds NAME: the CPU-seconds NAME's processes used, or -
  local stat=$ci_cgroups/$1/cpu.stat
  if [ -z "$ci_cgroups" ] || [ ! -r "$stat" ]; then echo -; return; fi
  awk '$1 == "usage_usec" {printf "%.0f\n", $2 / 1e6}' "$stat"
}
declare -A started
row_done() { # row_done NAME [END]: the row of NAME gets its time, up to END (default now)
  local i end=${2:-$(date +%s)}
  for i in "${!timings[@]}"; do
    if [ "${timings[$i]}" = "$1 running" ]; then timings[$i]="$1 $(( end - started[$1] ))"; fi
  done
}
# A phase's output also goes to its log: the boots column is read from
# there, and CI keeps bin/ci-logs when a run fails.
phase() { # phase NAME CMD...: run CMD and print how long it took
  local name=$1; shift
  started[$name]=$(date +%s)
  echo "==> $name"
  timings+=("$name running")
  { cpu_join "$name"; "$@"; } 2>&1 | tee "$logs/$name.log"
  row_done "$name"
  echo "<== $name: $(( $(date +%s) - started[$name] ))s"
}
# A background phase runs beside the ones that follow, its output in
# $logs/NAME.log; await prints that log and fails when the phase did. The
# VM phases use one core each (QEMU's TCG runs single-threaded), so a
# second job fills the other one.
declare -A bg_pid
# lowest CMD...: CMD at the lowest CPU and disk priority. A background
# phase is its own session, so its own scheduler autogroup, and nice
# counts only inside a group: the group itself gets nice 19 (without it
# the arm64 build took half the boot's core and doubled its docker runs).
lowest() {
  echo 19 >/proc/self/autogroup 2>/dev/null || true
  nice -n 19 ionice -c 3 "$@"
}
background() { # background NAME CMD...
  local name=$1; shift
  started[$name]=$(date +%s)
  echo "==> $name (in the background; log $logs/$name.log)"
  timings+=("$name running")
  # Its own session (so its own process group, which a failed run ends
  # with its children, and its own autogroup).
  # It notes when it ended: awaited after another, its row still says
  # how long it ran.
  rm -f "$logs/$name.end"
  CI_END_FILE="$logs/$name.end" CI_CGROUPS=$ci_cgroups CI_PHASE=$name setsid bash -c "$(declare -f lowest cpu_join)"'
    ci_cgroups=$CI_CGROUPS; cpu_join "$CI_PHASE"
    rc=0; "$@" || rc=$?; date +%s >"$CI_END_FILE"; exit $rc' bash "$@" >"$logs/$name.log" 2>&1 &
  bg_pid[$name]=$!
}
await() { # await NAME...: wait for background phases, print their logs
  local name rc failed=()
  for name in "$@"; do
    rc=0
    wait "${bg_pid[$name]}" || rc=$?
    echo "---- $name (log $logs/$name.log)"
    cat "$logs/$name.log"
    local end
    end=$(cat "$logs/$name.end" 2>/dev/null || date +%s)
    if [ "$rc" = 0 ]; then row_done "$name" "$end"; echo "<== $name: $(( end - started[$name] ))s"
    else failed+=("$name"); echo "<== $name FAILED (exit $rc)"; fi
  done
  # A failure's log is printed again last: CI keeps the end of the output.
  for name in "${failed[@]}"; do
    echo "---- $name failed; the end of its log:"
    tail -n 150 "$logs/$name.log"
  done
  [ "${#failed[@]}" = 0 ]
}
# boots NAME: "COLD/RESUMED" from the last "e2e boots: cold=N resumed=M"
# line an e2e test printed in the phase's log (hack/e2e prints it at its
# end, also when it fails), "-" for a phase that printed none.
boots() {
  local line
  line=$(grep -Eo 'e2e boots: cold=[0-9]+ resumed=[0-9]+' "$logs/$1.log" 2>/dev/null | tail -n 1) || true
  if [ -z "$line" ]; then echo -; return; fi
  line=${line#e2e boots: cold=}
  echo "${line% resumed=*}/${line#* resumed=}"
}
# failure_messages NAME: the last messages Go tests printed in the phase's
# log (t.Errorf/t.Fatalf lines, "    file_test.go:N: ...") and its FAIL
# lines. CI shows only the end of a run's output; a failed e2e's reason is
# otherwise hundreds of lines above the table.
failure_messages() {
  grep -E '^[[:space:]]+([A-Za-z0-9_]+\.go:[0-9]+: |--- FAIL)' "$logs/$1.log" 2>/dev/null | tail -n 25 | cut -c1-400 || true
}
# The timing table, also when a phase fails (its row says so), after the
# failed phases' test messages.
print_timings() {
  local rc=$? pid
  for pid in "${bg_pid[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  local row
  for row in "${timings[@]}"; do
    set -- $row
    if [ "$2" = running ]; then
      echo
      echo "---- $1 failed; its test messages:"
      failure_messages "$1"
    fi
  done
  echo
  printf '%-16s %8s %11s %s\n' "phase" "seconds" "cpu-seconds" "boots (cold/resumed)"
  local secs cpu cpu_total=0
  for row in "${timings[@]}"; do
    set -- $row
    secs=$2
    if [ "$2" = running ]; then secs="FAILED after $(( $(date +%s) - started[$1] ))"; fi
    cpu=$(cpu_seconds "$1")
    if [ "$cpu" != - ]; then cpu_total=$(( cpu_total + cpu )); fi
    printf '%-16s %8s %11s %s\n' "$1" "$secs" "$cpu" "$(boots "$1")"
  done
  printf '%-16s %8s %11s\n' "total" "$(( $(date +%s) - ci_start ))" "$cpu_total"
  if [ -n "$ci_cgroups" ]; then rmdir "$ci_cgroups"/* "$ci_cgroups" 2>/dev/null || true; fi
  return $rc
}
