#!/bin/sh
# Makes a throwaway CA and one serving certificate for the gpuslice webhook and
# extender Services (SANs: gpuslice-webhook.<ns>.svc, gpuslice-extender.<ns>.svc),
# with openssl.
#   gen-certs.sh [--namespace NS] [--out DIR] [--days N] [--apply]
# --apply also (with kubectl) creates/updates the Secret gpuslice-tls in NS
# (tls.crt, tls.key, ca.crt) and sets caBundle on both webhook configurations.
# The CA key stays in DIR; keep it or delete it, nothing in the cluster needs it.
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
    -h | --help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "gen-certs.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
case $days in '' | *[!0-9]*) echo "gen-certs.sh: --days must be a number" >&2; exit 2 ;; esac
command -v openssl >/dev/null || { echo "gen-certs.sh: openssl not found" >&2; exit 2; }
mkdir -p "$out"
cd "$out"
openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=gpuslice-ca" \
    -keyout ca.key -out ca.crt 2>/dev/null
cat >san.cnf <<CNF
subjectAltName=DNS:gpuslice-webhook.$ns.svc,DNS:gpuslice-webhook.$ns.svc.cluster.local,DNS:gpuslice-extender.$ns.svc,DNS:gpuslice-extender.$ns.svc.cluster.local
extendedKeyUsage=serverAuth
keyUsage=digitalSignature,keyEncipherment
CNF
openssl req -newkey rsa:2048 -nodes -subj "/CN=gpuslice-webhook.$ns.svc" \
    -keyout tls.key -out tls.csr 2>/dev/null
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile san.cnf -out tls.crt 2>/dev/null
rm -f tls.csr
openssl verify -CAfile ca.crt tls.crt >/dev/null
echo "gen-certs.sh: wrote $(pwd)/{ca.crt,ca.key,tls.crt,tls.key}"
if [ "$apply" = 1 ]; then
    command -v kubectl >/dev/null || { echo "gen-certs.sh: kubectl not found" >&2; exit 2; }
    kubectl -n "$ns" create secret generic gpuslice-tls --from-file=tls.crt --from-file=tls.key \
        --from-file=ca.crt --dry-run=client -o yaml | kubectl apply -f -
    bundle=$(base64 <ca.crt | tr -d '\n')
    for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
        kubectl patch "$kind" gpuslice-webhook --type=json \
            -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$bundle\"}]"
    done
fi
