#!/usr/bin/env bash
# Makes sure Chromium is installed for the console's browser tests
# (console/browser_test.go): Debian's chromium package, installed with
# apt-get when it is missing and this is root. Otherwise it says what to
# install and fails.
set -euo pipefail
for b in "${CODEMODE_CHROMIUM:-}" chromium chromium-browser google-chrome; do
	if [ -n "$b" ] && command -v "$b" >/dev/null 2>&1; then
		exit 0
	fi
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "installing chromium (Debian package) for the browser tests" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
	exit 0
fi
echo "the console's browser tests need Chromium: install the chromium package (or set CODEMODE_CHROMIUM to a Chrome binary)" >&2
exit 1
