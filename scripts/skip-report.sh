#!/usr/bin/env bash
# Prints the skip report of a test run: each test that skipped a part of itself, what it
# needed, and where that comes from (tests/support's skip() writes the lines as
# TEST<TAB>NEEDS<TAB>PROVIDER). Fails when a skipped prerequisite is a Debian package that
# scripts/prereqs.sh installs (`pkg:NAME`: the set-up is broken), and under CI on any skip at
# all, so no FUSE, netns or etcd test can silently stop running there.
#   bash scripts/skip-report.sh REPORT
set -euo pipefail
report=${1:?usage: skip-report.sh REPORT}
echo "== skip report"
# nextest counts #[ignore]d tests as skipped: here those are the subprocess helpers only, which
# their parent tests run as child processes. Say which, so the summary's count is explained.
# Every crate's folder is searched; finding none is no error (the report says so).
helpers=$( (grep -rl --include='*.rs' 'ignore = "subprocess helper' core sim services client real crosscheck scenarios reports src tests 2>/dev/null || true) \
  | xargs -r grep -h -A1 'ignore = "subprocess helper' | sed -n 's/^fn \([a-z_0-9]*\).*/\1/p' | sort | tr '\n' ' ')
if [ -n "$helpers" ]; then
  echo "subprocess helpers, not tests (nextest lists them as skipped): $helpers"
fi
if [ ! -s "$report" ]; then
  echo "no test skipped anything"
  exit 0
fi
sort "$report" | uniq -c | while read -r n line; do
  IFS=$'\t' read -r test needs provider <<<"$line"
  printf '  %-70s needs %s (%s)%s\n' "$test" "$needs" "$provider" "$([ "$n" -gt 1 ] && echo " x$n")"
done
fail=0
if grep -q $'\tpkg:' "$report"; then
  echo "error: tests skipped for want of packages that scripts/prereqs.sh installs" >&2
  fail=1
fi
if [ "${CI:-}" = "true" ]; then
  echo "error: under CI no test may skip (the report above says what was missing)" >&2
  fail=1
fi
exit $fail
