#!/usr/bin/env bash
# Podmin's whole test suite: deno tests (units beside the code, integration in
# tests/). Ends with a plain "N passed, N failed, N skipped" line. Under CI=true
# any test ignored for a missing tool or missing root also counts as a failure.
#
# Three lanes run at once (tests/README.md, "Lanes"), each one `deno test` whose files run one
# after another: the host lane (everything not listed below: real nodes on this host's network
# namespace, the dataplane, the units), the machine lane (BOX_LANE: the machine harness, whose
# machines have network namespaces, mounts and cgroups of their own, and shared-lane-safe folders
# that balance it) and the shared lane (SHARED_LANE: tests touching nothing of the host but peers of
# their own on free loopback ports and their own temporary directories). The machine and shared
# lanes' output follows the host lane's; the last line counts all three. With arguments (files, a
# filter) one `deno test` runs them, as given.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bash tests/setup.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
export PATH="${PODMIN_TEST_BIN:-/opt/podmin-test/bin}:$PATH"

# The machine lane: the machine harness (tests/box) beside the host lane, then shared-safe folders.
BOX_LANE=(tests/box tests/cluster_setup)
SHARED_LANE=(tests/build tests/deployments tests/docs tests/faults tests/iam tests/identity tests/mesh
  tests/secrets tests/store tests/bench/bench_smoke_shared_test.ts)

logs=$(mktemp -d)
side_pids=()
cleanup() {
  # The side lanes run in sessions of their own: end them with their peers if this run is cut short.
  local pid
  for pid in "${side_pids[@]}"; do { kill -- "-$pid" || kill "$pid"; } 2>/dev/null; done
  rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0 failed=0 ignored=0
# count LOG STATUS: adds the counts of the deno test run that wrote LOG and exited STATUS.
count() {
  local summary p f i
  summary=$(sed 's/\x1b\[[0-9;]*m//g' "$1" | grep -E '^(ok|FAILED) \| [0-9]+ passed' | tail -n 1)
  p=$(sed -nE 's/.*\| ([0-9]+) passed.*/\1/p' <<<"$summary")
  f=$(sed -nE 's/.*\| ([0-9]+) failed.*/\1/p' <<<"$summary")
  i=$(sed -nE 's/.*\| ([0-9]+) ignored.*/\1/p' <<<"$summary")
  p=${p:-0} f=${f:-0} i=${i:-0}
  if [[ -z "$summary" ]]; then
    echo "$1: test run produced no summary (deno test exited $2)" >&2
    f=$((f + 1))
  elif (($2 != 0 && f == 0)); then
    echo "$1: deno test exited $2 without a failed test (load or uncaught error)" >&2
    f=1
  fi
  passed=$((passed + p)) failed=$((failed + f)) ignored=$((ignored + i))
}

if (($# > 0)); then
  deno test --allow-all "$@" 2>&1 | tee "$logs/tests.log"
  count "$logs/tests.log" "${PIPESTATUS[0]}"
else
  started=$SECONDS
  # side_lane NAME FILE...: starts one lane in a session of its own; its log and its run time (the
  # seconds from the start until it ended) land in $logs.
  side_lane() {
    local name=$1
    shift
    # shellcheck disable=SC2016 # the inner bash expands them
    setsid --wait bash -c 'deno test --allow-all "$@"; status=$?; echo $((SECONDS)) >"$0.s"; exit $status' \
      "$logs/$name" "$@" >"$logs/$name.log" 2>&1 &
    side_pids+=($!)
  }
  side_lane machine "${BOX_LANE[@]}"
  side_lane shared "${SHARED_LANE[@]}"
  deno test --allow-all --ignore="$(IFS=,; echo "${BOX_LANE[*]},${SHARED_LANE[*]}")" 2>&1 |
    tee "$logs/host.log"
  host_status=${PIPESTATUS[0]}
  host_s=$((SECONDS - started))
  statuses=()
  for pid in "${side_pids[@]}"; do
    wait "$pid"
    statuses+=($?)
  done
  side_pids=()
  echo
  echo "== machine lane (${BOX_LANE[*]}), run beside the host lane above =="
  cat "$logs/machine.log"
  echo
  echo "== shared lane (${SHARED_LANE[*]}), run beside the host lane above =="
  cat "$logs/shared.log"
  echo "lanes: host ${host_s} s, machine $(cat "$logs/machine.s" 2>/dev/null || echo ?) s," \
    "shared $(cat "$logs/shared.s" 2>/dev/null || echo ?) s; all done at $((SECONDS - started)) s"
  count "$logs/host.log" "$host_status"
  count "$logs/machine.log" "${statuses[0]}"
  count "$logs/shared.log" "${statuses[1]}"
fi

if ((ignored > 0)); then
  if [[ "${CI:-}" == "true" ]]; then
    echo "$ignored test(s) were skipped; CI runs every test, so they count as failed" >&2
    failed=$((failed + ignored))
  else
    echo "note: $ignored test(s) skipped (they say why above); CI runs them all" >&2
  fi
fi
echo "${passed} passed, ${failed} failed, ${ignored} skipped"
((failed == 0))
