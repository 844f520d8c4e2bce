#!/bin/sh
# the new binary with three --header rules, one of which matches GET /
exec /tmp/bins/new --header '/**=Strict-Transport-Security: max-age=63072000' --header '*.js=X-Content-Type-Options: nosniff' --header '/assets/**=Access-Control-Allow-Origin: *' "$@"
