# shellcheck shell=bash
# The cluster's certificates and kubeconfigs (sourced by cluster.sh, after common.sh).
# Made once with openssl under PKI_DIR and kept by `down`, so a warm `up` signs nothing.
# EC P-256 keys: quick to make, and every client (kubectl 1.20 to current) reads them.

# new_key FILE: an EC P-256 private key, readable by root only.
new_key() {
  (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null)
}

make_ca() {
  new_key "$PKI_DIR/ca.key"
  openssl req -x509 -new -key "$PKI_DIR/ca.key" -out "$PKI_DIR/ca.crt" -days 3650 \
    -subj "/CN=ascend-test-cluster-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

# issue NAME CN ORG USAGE [SANS]: NAME.key and NAME.crt signed by the CA, unless present.
# ORG becomes the Kubernetes group; USAGE is clientAuth or serverAuth.
issue() {
  local name="$1" cn="$2" org="$3" usage="$4" sans="${5:-}" subject
  [[ -f "$PKI_DIR/$name.crt" ]] && return 0
  subject="/CN=$cn"
  [[ -n "$org" ]] && subject="/O=$org$subject"
  new_key "$PKI_DIR/$name.key"
  openssl req -new -key "$PKI_DIR/$name.key" -subj "$subject" |
    openssl x509 -req -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" -CAcreateserial \
      -CAserial "$PKI_DIR/ca.srl" -days 3650 -out "$PKI_DIR/$name.crt" 2>/dev/null \
      -extfile <(
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$usage"
        [[ -n "$sans" ]] && echo "subjectAltName=$sans"
      )
}

ensure_pki() {
  mkdir -p "$PKI_DIR"
  # Everything is signed by the CA: without its key, start over.
  if [[ ! -f "$PKI_DIR/ca.key" ]]; then
    rm -rf "${PKI_DIR:?}"/*
    make_ca
  fi
  # The apiserver is reached on the node address, on loopback by its own clients, and from
  # pods through the `kubernetes` Service.
  issue apiserver kube-apiserver "" serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:$NODE_IP,IP:127.0.0.1,IP:$API_SERVICE_IP"
  # In system:masters, so the kubelet's webhook authorizer lets the apiserver do logs and exec.
  issue apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth
  issue admin kubernetes-admin system:masters clientAuth
  issue controller-manager system:kube-controller-manager "" clientAuth
  issue scheduler system:kube-scheduler "" clientAuth
  issue kube-proxy system:kube-proxy "" clientAuth
  # The Node authorizer and NodeRestriction know a kubelet by this name and group.
  issue "kubelet-$NODE_NAME" "system:node:$NODE_NAME" system:nodes clientAuth
  issue "kubelet-$NODE_NAME-serving" "$NODE_NAME" "" serverAuth "DNS:$NODE_NAME,IP:$NODE_IP"
  # The controller-manager signs ServiceAccount tokens with this key; the apiserver checks them.
  if [[ ! -f "$PKI_DIR/sa.key" ]]; then
    (umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI_DIR/sa.key" 2>/dev/null)
    openssl pkey -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub"
  fi
}

# write_kubeconfig FILE CERT_NAME: a kubeconfig for the user of CERT_NAME, certificates
# embedded so that it works from anywhere and with any kubectl.
write_kubeconfig() {
  local file="$1" cert="$2"
  (umask 077 && cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ascend-test
  cluster:
    server: https://$NODE_IP:6443
    certificate-authority-data: $(base64 -w0 "$PKI_DIR/ca.crt")
users:
- name: $cert
  user:
    client-certificate-data: $(base64 -w0 "$PKI_DIR/$cert.crt")
    client-key-data: $(base64 -w0 "$PKI_DIR/$cert.key")
contexts:
- name: ascend-test
  context: {cluster: ascend-test, user: $cert}
current-context: ascend-test
EOF
  )
}
