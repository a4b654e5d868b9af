#!/bin/sh
# Makes the Secrets the manifests mount (their values are never in the manifests); run again to replace
# them. Needs kubectl (pointed at the cluster), tooldock, and in the environment:
#   CA                      a cluster CA directory (tooldock cluster ca init DIR): certificates are issued
#   TOOLDOCK_BEARER_TOKEN   the token clients send to the gateway
#   API_TOKEN               declared by secretive
#   WEATHER_API_KEY         declared by async-tool
# Redis's password and the gateways' state key are generated each run: after running it again, restart
# Redis and the gateways (kubectl -n NS rollout restart deployment).
set -eu
NS=tooldock
: "${CA:?set CA to the cluster CA directory (tooldock cluster ca init DIR)}"
: "${TOOLDOCK_BEARER_TOKEN:?set TOOLDOCK_BEARER_TOKEN to the bearer token clients will send}"
: "${API_TOKEN:?set API_TOKEN: a secret a namespace declares}"
: "${WEATHER_API_KEY:?set WEATHER_API_KEY: a secret a namespace declares}"
umask 077
kubectl apply -f "$(dirname "$0")/10-namespace.yaml"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
apply() { kubectl -n "$NS" create secret generic "$@" --dry-run=client -o yaml | kubectl apply -f -; }
random() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
password=$(random 24)
random 32 > "$tmp/state-key"
printf '%s' "$TOOLDOCK_BEARER_TOKEN" > "$tmp/bearer-token"
printf 'redis://:%s@tooldock-redis.tooldock.svc.cluster.local:6379/0' "$password" > "$tmp/state-url"
printf 'port 6379\nrequirepass %s\nsave ""\nappendonly no\ndir /data\n' "$password" > "$tmp/redis.conf"
apply tooldock-gateway --from-file="$tmp/bearer-token" --from-file="$tmp/state-url" --from-file="$tmp/state-key"
apply tooldock-redis --from-file="$tmp/redis.conf"
peer=$(tooldock cluster cert "$CA" --name tooldock-gateway) && apply tooldock-gateway-tls --from-file="$peer"
peer=$(tooldock cluster cert "$CA" --name worker-async-tool) && apply worker-async-tool-tls --from-file="$peer"
peer=$(tooldock cluster cert "$CA" --name worker-basic-tool) && apply worker-basic-tool-tls --from-file="$peer"
peer=$(tooldock cluster cert "$CA" --name worker-multi-tool) && apply worker-multi-tool-tls --from-file="$peer"
peer=$(tooldock cluster cert "$CA" --name worker-secretive) && apply worker-secretive-tls --from-file="$peer"
printf '%s' "$WEATHER_API_KEY" > "$tmp/WEATHER_API_KEY"
apply worker-async-tool-secrets --from-file="$tmp/WEATHER_API_KEY"
printf '%s' "$API_TOKEN" > "$tmp/API_TOKEN"
apply worker-secretive-secrets --from-file="$tmp/API_TOKEN"
echo "Secrets made in namespace $NS; now: kubectl apply -f <this directory>" >&2
