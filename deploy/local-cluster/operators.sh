# shellcheck shell=bash
# The training operators of the local cluster, sourced by cluster.sh (its helpers: log, sign,
# kubectl_, run_declared, components, ...): JobSet, Kubeflow Trainer v2 and LeaderWorkerSet,
# each a component (deploy/stack/components/{jobset,trainer,lws}.py) built from its Go module,
# run as a local process with a configuration file of its component's, its CRDs from the same
# module, and its webhooks served on 127.0.0.1 with a certificate of the cluster's CA (as
# Kueue's are): JobSet and Trainer default and validate through them, LWS labels its pods.
# Kueue admits JobSets, TrainJobs and LeaderWorkerSets (config/kueue-config.yaml): their CRDs
# are applied before Kueue starts, the operators after it.

TRAINING_OPERATORS="jobset trainer lws"

# module_dir <component>: its module's directory in the module cache (downloaded when missing)
module_dir() {
  local c="$1" dir
  dir="$(gomodcache_or_die)/$(component_var "$c" MODULE)@$(component_var "$c" VERSION)"
  if [[ ! -d "$dir" ]]; then  # binaries cached but module cache cleaned
    require_go
    (cd "$ROOT/$(component_var "$c" WRAPPER)" \
      && go mod download "$(component_var "$c" MODULE)@$(component_var "$c" VERSION)") >&2
  fi
  echo "$dir"
}

# The CRDs of the three operators (LWS's DisaggregatedSet too: its controller watches them).
apply_training_crds() {
  local jobset trainer lws
  jobset="$(module_dir jobset)/config/components/crd/bases"
  trainer="$(module_dir trainer)/manifests/base/crds"
  lws="$(module_dir lws)/config/crd/bases"
  local marker="$CLUSTER_DIR/crds-applied-jobset-$JOBSET_VERSION-trainer-$TRAINER_VERSION-lws-$LWS_VERSION"
  local crds="jobsets.jobset.x-k8s.io trainjobs.trainer.kubeflow.org clustertrainingruntimes.trainer.kubeflow.org \
trainingruntimes.trainer.kubeflow.org leaderworkersets.leaderworkerset.x-k8s.io"
  # shellcheck disable=SC2086  # $crds: one name a word
  if [[ -f "$marker" ]] && kubectl_ get crd $crds >/dev/null 2>&1; then return 0; fi
  log "CRDs: JobSet $JOBSET_VERSION, Trainer $TRAINER_VERSION, LeaderWorkerSet $LWS_VERSION (server-side apply)"
  kubectl_ apply --server-side --force-conflicts -f "$jobset" -f "$lws" \
    -f "$trainer/trainer.kubeflow.org_trainjobs.yaml" -f "$trainer/trainer.kubeflow.org_trainingruntimes.yaml" \
    -f "$trainer/trainer.kubeflow.org_clustertrainingruntimes.yaml" >/dev/null
  # shellcheck disable=SC2086
  wait_for "the training operators' CRDs" 60 kubectl_ wait --for condition=Established --timeout 5s crd $crds
  touch "$marker"
}

# webhook_cert_dir <component>: where its webhook server reads tls.crt and tls.key. JobSet and
# LWS take it from their configuration; the Trainer has no setting: controller-runtime's
# default under $TMPDIR, which start_operator points at $PKI/trainer-tmp.
webhook_cert_dir() {
  if [[ $1 == trainer ]]; then echo "$PKI/trainer-tmp/k8s-webhook-server/serving-certs"; else echo "$PKI/$1-webhook"; fi
}

ensure_operator_pki() {
  local c dir
  for c in $TRAINING_OPERATORS; do
    dir="$(webhook_cert_dir "$c")"
    [[ -s "$dir/tls.crt" ]] && continue
    ensure_openssl
    log "certificates: $c's webhook server"
    mkdir -p "$dir"
    sign "${dir#"$PKI/"}/tls" "/CN=$c-webhook" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
  done
}

# write_config <component> <binary>: its configuration file from its component; a process
# running with another one is stopped (it reads the file at start only).
write_config() {
  local c="$1" file="$CLUSTER_DIR/$1-config.json"
  components config "$c" --cluster-dir "$CLUSTER_DIR" --config-dir "$CONFIG" >"$file.new" \
    || die "no configuration declared for $c (deploy/stack/components/)"
  if ! cmp -s "$file.new" "$file" && is_running "$2"; then
    log "$c: its configuration changed, restarting it"
    stop_group "$2"
    rm -f "$PIDS/$2.pid"
  fi
  mv -f "$file.new" "$file"
}

operator_ready() { # operator_ready <component>: readyz answers and its webhook server speaks TLS with our CA
  components ready "$1" || return 1
  url_check "https://127.0.0.1:$(component_var "$1" WEBHOOK_PORT)/" any "$PKI/ca.crt"
}

# apply_operator_webhooks <component> <manifests.yaml> [pod label]: its webhook configurations,
# pointed at https://127.0.0.1:<its webhook port> (webhooks.py).
apply_operator_webhooks() {
  local c="$1" src="$2" label="${3:-}"
  local -a pod=()
  [[ -z $label ]] || pod=(--pod-label "$label")
  kubectl_ create --dry-run=client -o json -f "$src" \
    | python3 -E "$HERE/webhooks.py" --prefix "$c" --port "$(component_var "$c" WEBHOOK_PORT)" --ca "$PKI/ca.crt" "${pod[@]}" \
    | kubectl_ apply --server-side --force-conflicts -f - >/dev/null
}

start_jobset() {
  write_config jobset jobset-controller
  KUBECONFIG="$KUBECONFIG_PATH" run_declared start_current jobset-controller
  wait_for "JobSet controller and webhook" 90 operator_ready jobset
  apply_operator_webhooks jobset "$(module_dir jobset)/config/components/webhook/manifests.yaml" \
    jobset.sigs.k8s.io/jobset-name
}

start_trainer() {
  write_config trainer trainer-controller-manager
  KUBECONFIG="$KUBECONFIG_PATH" TMPDIR="$PKI/trainer-tmp" run_declared start_current trainer-controller-manager
  wait_for "Trainer controller and webhook" 90 operator_ready trainer
  apply_operator_webhooks trainer "$(module_dir trainer)/manifests/base/webhook/manifests.yaml"
  apply_training_runtimes
}

start_lws() {
  write_config lws lws-controller
  KUBECONFIG="$KUBECONFIG_PATH" run_declared start_current lws-controller
  wait_for "LeaderWorkerSet controller and webhook" 90 operator_ready lws
  apply_operator_webhooks lws "$(module_dir lws)/config/webhook/manifests.yaml" leaderworkerset.sigs.k8s.io/name
}

# The ClusterTrainingRuntimes the Trainer ships (manifests/base/runtimes: torch-distributed,
# deepspeed-distributed, ...), plain YAML without kustomize; their images do not matter (kwok
# runs no containers). The platform offers them as TrainJob presets.
apply_training_runtimes() {
  local dir; dir="$(module_dir trainer)/manifests/base/runtimes"
  local -a files=() names=()
  local f
  for f in "$dir"/*.yaml; do
    [[ $(basename "$f") == kustomization.yaml ]] && continue
    files+=(-f "$f") names+=("$(basename "$f" .yaml)")
  done
  log "Trainer: ClusterTrainingRuntimes of $TRAINER_VERSION (${names[*]})"
  kubectl_ apply --server-side --force-conflicts "${files[@]}" >/dev/null
}

TRAINING_BINARIES=(jobset-controller trainer-controller-manager lws-controller)

start_training_operators() {
  ensure_operator_pki
  start_jobset
  start_trainer
  start_lws
  local b
  for b in "${TRAINING_BINARIES[@]}"; do alive_or_die "$b"; done
}

stop_training_operators() { stop_group "${TRAINING_BINARIES[@]}"; }
