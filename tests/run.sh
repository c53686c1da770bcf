#!/usr/bin/env bash
# Podmin's whole test suite: deno tests (units beside the code, integration in
# tests/). Ends with a plain "N passed, N failed, N skipped" line. Under CI=true
# any test ignored for a missing tool or missing root also counts as a failure.
#
# Two lanes run at once (tests/README.md, "Lanes"), each one `deno test` whose files run one
# after another: the shared lane (the folders of SHARED_LANE, whose tests touch nothing of the
# host but peers of their own on free loopback ports and their own temporary directories) beside
# the exclusive lane (everything else). The shared lane's output follows the exclusive lane's; the
# last line counts both. With arguments (files, a filter) one `deno test` runs them, as given.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bash tests/setup.sh || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
export PATH="${PODMIN_TEST_BIN:-/opt/podmin-test/bin}:$PATH"

SHARED_LANE=(tests/build tests/cluster_setup tests/deployments tests/docs tests/iam tests/identity tests/mesh
  tests/secrets tests/store)

logs=$(mktemp -d)
shared_pid=
cleanup() {
  # The shared lane runs in a session of its own: end it with its peers if this run is cut short.
  [[ -n $shared_pid ]] && { kill -- "-$shared_pid" || kill "$shared_pid"; } 2>/dev/null
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
  setsid --wait deno test --allow-all "${SHARED_LANE[@]}" >"$logs/shared.log" 2>&1 &
  shared_pid=$!
  deno test --allow-all --ignore="$(IFS=,; echo "${SHARED_LANE[*]}")" 2>&1 |
    tee "$logs/exclusive.log"
  exclusive_status=${PIPESTATUS[0]}
  exclusive_s=$((SECONDS - started))
  wait "$shared_pid"
  shared_status=$?
  shared_pid=
  echo
  echo "== shared lane (${SHARED_LANE[*]}), run beside the exclusive lane above =="
  cat "$logs/shared.log"
  echo "lanes: exclusive ${exclusive_s} s, both done at $((SECONDS - started)) s"
  count "$logs/exclusive.log" "$exclusive_status"
  count "$logs/shared.log" "$shared_status"
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
