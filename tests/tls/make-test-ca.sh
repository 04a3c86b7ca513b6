#!/usr/bin/env bash
# Makes a throwaway certificate authority and server certificates for the TLS tests, with the
# openssl command line, into DIR (created). Nothing here is trusted outside the tests that pass
# DIR/ca.pem as --ca-file (or NODE_EXTRA_CA_CERTS).
#   ca.pem ca.key               the test CA
#   localhost.pem localhost.key for localhost and 127.0.0.1, valid now
#   wrong-host.pem .key         valid now, but for wrong-host.example only
#   expired.pem .key            for localhost and 127.0.0.1, expired in 2021
#   other-ca.pem other.pem .key a second CA and a localhost certificate it signed
# usage: make-test-ca.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # NAME SUBJECT
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 30 -subj "/CN=$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
# NAME CA SAN [STARTDATE ENDDATE]: signed with `openssl ca`, which can set the validity dates.
leaf() {
  local name=$1 issuer=$2 san=$3 start=${4:-} end=${5:-}
  key "$name.key"
  openssl req -new -key "$name.key" -out "$name.csr" -subj "/CN=$name"
  mkdir -p "ca-db-$issuer"
  : > "ca-db-$issuer/index.txt"
  [ -f "ca-db-$issuer/serial" ] || openssl rand -hex 16 > "ca-db-$issuer/serial"
  cat > "$name.cnf" <<CNF
[ca]
default_ca = test
[test]
database = ca-db-$issuer/index.txt
serial = ca-db-$issuer/serial
new_certs_dir = ca-db-$issuer
default_md = sha256
policy = anything
copy_extensions = none
x509_extensions = leaf
unique_subject = no
[anything]
commonName = supplied
[leaf]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
CNF
  local dates=(-days 30)
  [ -n "$start" ] && dates=(-startdate "$start" -enddate "$end")
  openssl ca -batch -notext -config "$name.cnf" -cert "$issuer.pem" -keyfile "$issuer.key" \
    -in "$name.csr" -out "$name.pem" "${dates[@]}" 2>/dev/null
  rm -f "$name.csr" "$name.cnf"
}
ca ca "AgentPay test CA"
ca other-ca "AgentPay other test CA"
leaf localhost ca "DNS:localhost,IP:127.0.0.1"
leaf wrong-host ca "DNS:wrong-host.example"
leaf expired ca "DNS:localhost,IP:127.0.0.1" 20200101000000Z 20210101000000Z
leaf other other-ca "DNS:localhost,IP:127.0.0.1"
rm -rf ca-db-ca ca-db-other-ca
chmod 600 ./*.key
