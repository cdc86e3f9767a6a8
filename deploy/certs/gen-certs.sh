#!/bin/sh
# Makes gpuslice's certificates with openssl, for the plain manifests (the chart
# makes its own unless tls.source=existing):
#   ca.crt          serving CA: issues the two serving certificates below
#   extender.crt    gpuslice-extender.<ns>.svc (serverAuth)
#   webhook.crt     gpuslice-webhook.<ns>.svc (serverAuth)
#   client-ca.crt   client CA: issues kube-scheduler's certificate and nothing else
#   scheduler.crt   CN kube-scheduler (clientAuth), for the extender's mutual TLS
# and a .key for each.
#   gen-certs.sh [--namespace NS] [--out DIR] [--days N] [--apply]
# --apply also (with kubectl) creates/updates the Secrets gpuslice-extender-tls,
# gpuslice-webhook-tls and gpuslice-scheduler-client-tls in NS (tls.crt, tls.key,
# ca.crt = the issuer), the assignment-signing key gpuslice-assignment-key (once),
# and sets caBundle on both webhook configurations.
# The CA keys stay in DIR; nothing in the cluster needs them.
set -eu
ns=gpuslice-system
out=./gpuslice-certs
days=365
apply=0
while [ $# -gt 0 ]; do
    case $1 in
    --namespace) ns=${2:?--namespace needs a value}; shift 2 ;;
    --out) out=${2:?--out needs a value}; shift 2 ;;
    --days) days=${2:?--days needs a value}; shift 2 ;;
    --apply) apply=1; shift ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "gen-certs.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
case $days in '' | *[!0-9]*) echo "gen-certs.sh: --days must be a number" >&2; exit 2 ;; esac
command -v openssl >/dev/null || { echo "gen-certs.sh: openssl not found" >&2; exit 2; }
mkdir -p "$out"
cd "$out"

ca() { # file CN
    openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=$2" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
        -keyout "$1.key" -out "$1.crt" 2>/dev/null
}
leaf() { # file CN issuer extensions
    printf '%s\n' "$4" >"$1.ext"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA "$3.crt" -CAkey "$3.key" -CAcreateserial -days "$days" \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
serving() { # service
    d=gpuslice-$1.$ns.svc
    leaf "$1" "$d" ca "subjectAltName=DNS:$d,DNS:$d.cluster.local
extendedKeyUsage=serverAuth
keyUsage=critical,digitalSignature,keyEncipherment"
    openssl verify -purpose sslserver -CAfile ca.crt "$1.crt" >/dev/null
}
ca ca gpuslice-serving-ca
ca client-ca gpuslice-scheduler-client-ca
serving extender
serving webhook
leaf scheduler kube-scheduler client-ca "extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature,keyEncipherment"
openssl verify -purpose sslclient -CAfile client-ca.crt scheduler.crt >/dev/null
echo "gen-certs.sh: wrote $(pwd)/{ca,client-ca,extender,webhook,scheduler}.{crt,key}"

if [ "$apply" = 1 ]; then
    command -v kubectl >/dev/null || { echo "gen-certs.sh: kubectl not found" >&2; exit 2; }
    secret() { # name cert issuer
        kubectl -n "$ns" create secret generic "$1" --type=kubernetes.io/tls \
            --from-file=tls.crt="$2.crt" --from-file=tls.key="$2.key" --from-file=ca.crt="$3.crt" \
            --dry-run=client -o yaml | kubectl apply -f -
    }
    secret gpuslice-extender-tls extender ca
    secret gpuslice-webhook-tls webhook ca
    secret gpuslice-scheduler-client-tls scheduler client-ca
    # The assignment-signing key (64 random characters), made once: a new key
    # would void the signatures of pods already bound.
    # It goes to the extender's namespace and the node agent's (kube-system).
    if ! kubectl -n "$ns" get secret gpuslice-assignment-key >/dev/null 2>&1; then
        kubectl -n "$ns" create secret generic gpuslice-assignment-key \
            --from-literal=key="$(openssl rand -hex 32)"
    fi
    kubectl -n "$ns" get secret gpuslice-assignment-key -o yaml |
        sed -e "s/namespace: $ns\$/namespace: kube-system/" -e '/resourceVersion:/d' -e '/uid:/d' \
            -e '/creationTimestamp:/d' | kubectl apply -f -
    bundle=$(base64 <ca.crt | tr -d '\n')
    for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
        kubectl patch "$kind" gpuslice-webhook --type=json \
            -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$bundle\"}]"
    done
fi
