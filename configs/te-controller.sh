#!/bin/sh
# A traffic-engineering controller's side of fabriclb's override channel:
# rows FABRICLB_OVERRIDE_TABLE:<name> in APPL_DB (database 0) of the Redis
# that `fabriclb run --sonic ADDRESS` follows, written with redis-cli as a
# controller (or an operator) would. Each pin replaces its row whole in one
# transaction, so the daemon never reads half of an old and half of a new
# one. Field names and the daemon's checks: README, "Overrides and traffic
# engineering".
#
#   te-controller.sh [-s SOCKET | -h HOST -p PORT] pin NAME dst=PREFIX \
#       nexthop=IP|MAC ifname=IF [src=PREFIX] [ingress=IF] [dest_qp=N] [vlan=N]
#   te-controller.sh [-s SOCKET | -h HOST -p PORT] unpin NAME
#   te-controller.sh [-s SOCKET | -h HOST -p PORT] list
set -eu

usage() {
    sed -n '10,13p' "$0" >&2
    exit 2
}

connection=""
while [ $# -gt 0 ]; do
    case "$1" in
        -s) connection="$connection -s $2"; shift 2 ;;
        -h) connection="$connection -h $2"; shift 2 ;;
        -p) connection="$connection -p $2"; shift 2 ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || usage
table="FABRICLB_OVERRIDE_TABLE"

# Runs the commands on standard input in APPL_DB; fails on any error reply.
run() {
    # shellcheck disable=SC2086 # the connection arguments split on purpose
    out=$(redis-cli $connection -n 0) || exit 1
    if printf '%s\n' "$out" | grep -q '^\(ERR\|WRONGTYPE\|EXECABORT\)'; then
        printf '%s\n' "$out" >&2
        exit 1
    fi
}

case "$1" in
    pin)
        [ $# -ge 3 ] || usage
        name=$2
        shift 2
        fields=""
        for pair in "$@"; do
            case "$pair" in
                *=*) fields="$fields ${pair%%=*} ${pair#*=}" ;;
                *) usage ;;
            esac
        done
        printf 'MULTI\nDEL %s:%s\nHSET %s:%s%s\nEXEC\n' \
            "$table" "$name" "$table" "$name" "$fields" | run
        ;;
    unpin)
        [ $# -eq 2 ] || usage
        printf 'DEL %s:%s\n' "$table" "$2" | run
        ;;
    list)
        # shellcheck disable=SC2086
        redis-cli $connection -n 0 --scan --pattern "$table:*"
        ;;
    *) usage ;;
esac
