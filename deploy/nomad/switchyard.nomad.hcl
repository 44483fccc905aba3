# Switchyard — one Nomad job file for every service (Nomad 1.6, MPL-2.0).
#
# Run once per service; each run registers job "switchyard-<service>" with
# task group "<service>" (the names the planner's Nomad actuator scales):
#
#   nomad job run -var service=router -var version=0.7.0 \
#     -var checksum=<sha256 of router-0.7.0-linux-amd64.tar.gz> \
#     -var artifact_base=https://releases.example/switchyard \
#     deploy/nomad/switchyard.nomad.hcl
#
# scripts/nomad-deploy.sh takes version and checksum from a release's
# SHA256SUMS and checks the artifact answers first. What differs between
# the services is the one map local.services below; everything else (the
# update stanza, checks, artifact, secrets) is shared, so a fix lands in
# all six jobs at once. deploy/nomad/README.md explains the variables.

variable "service" {
  type        = string
  description = "which service this job runs: frontend, router, prefill, decode, kvbm-controller or planner"
  validation {
    condition     = contains(["frontend", "router", "prefill", "decode", "kvbm-controller", "planner"], var.service)
    error_message = "The service must be one of frontend, router, prefill, decode, kvbm-controller, planner."
  }
}

# Nomad's HCL2 has no regex(): a value matches a whole-string pattern
# when regex_replace leaves nothing of it.
variable "version" {
  type        = string
  description = "the service's release version (services/<svc>/VERSION), e.g. 0.7.0: it names the artifact"
  validation {
    condition     = var.version != "" && regex_replace(var.version, "^[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?$", "") == ""
    error_message = "The version must be a semantic version MAJOR.MINOR.PATCH[-PRERELEASE], e.g. 0.7.0."
  }
}

variable "checksum" {
  type        = string
  description = "SHA-256 (64 hex digits) of <service>-<version>-linux-<arch>.tar.gz, from the release's SHA256SUMS"
  validation {
    condition     = var.checksum != "" && regex_replace(var.checksum, "^[0-9a-f]{64}$", "") == ""
    error_message = "The checksum must be the archive's SHA-256: 64 lower-case hex digits, as in SHA256SUMS."
  }
}

variable "artifact_base" {
  type        = string
  description = "http(s) URL of the directory holding the release archives (make release's dist/)"
  validation {
    condition     = regex_replace(var.artifact_base, "^https?://[^/]+", "") != var.artifact_base
    error_message = "The artifact_base must be an http:// or https:// URL (Nomad fetches artifacts over HTTP)."
  }
}

variable "arch" {
  type    = string
  default = "amd64"
  validation {
    condition     = contains(["amd64", "arm64"], var.arch)
    error_message = "The arch must be amd64 or arm64 (the release's GOARCH)."
  }
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "driver" {
  type        = string
  default     = "raw_exec"
  description = "raw_exec (no isolation; needs raw_exec enabled on the clients, as in a dev agent) or exec (chroot and cgroups; needs root on the clients, and the model inside the chroot)"
  validation {
    condition     = contains(["raw_exec", "exec"], var.driver)
    error_message = "The driver must be raw_exec or exec."
  }
}

variable "consul_addr" {
  type        = string
  default     = "127.0.0.1:8500"
  description = "host:port of the Consul agent the processes register with (-discovery consul): the node's local agent"
}

variable "count" {
  type        = number
  default     = 0
  description = "instances of the group; 0 takes the service's default from local.services"
  validation {
    condition     = var.count >= 0
    error_message = "The count must not be negative."
  }
}

variable "cpu" {
  type        = number
  default     = 0
  description = "MHz reserved per instance; 0 takes the service's default"
}

variable "memory" {
  type        = number
  default     = 0
  description = "MiB reserved per instance; 0 takes the service's default"
}

variable "gpus" {
  type        = number
  default     = 0
  description = "NVIDIA GPUs per prefill or decode instance (a device \"nvidia/gpu\" request); 0 requests none"
  validation {
    condition     = var.gpus >= 0
    error_message = "The gpus must not be negative."
  }
}

variable "model" {
  type        = string
  default     = ""
  description = "prefill/decode: llama2.c checkpoint path on the client nodes; empty serves the built-in tiny random model"
}

variable "tokenizer" {
  type        = string
  default     = ""
  description = "prefill/decode: tokenizer path on the client nodes; empty: found beside the model"
}

variable "redis_addr" {
  type        = string
  default     = ""
  description = "router: Redis host:port for KV index snapshots (warm restarts); empty: none"
}

variable "api_keys" {
  type        = string
  default     = ""
  description = "frontend: API key entries (keys-file lines) used only when the Nomad Variable nomad/jobs/switchyard-frontend has no api_keys item"
}

variable "nomad_addr" {
  type        = string
  default     = ""
  description = "planner: Nomad HTTP API URL; set, the planner scales the prefill and decode jobs (-actuator nomad); empty: it plans and reports only"
}

variable "tls" {
  type        = bool
  default     = true
  description = "mutual TLS between the services, with certificates from the Nomad Variables (tls_ca, tls_cert, tls_key items of nomad/jobs/switchyard-<service>, else of nomad/jobs); false: plaintext h2c"
}

variable "min_healthy_time" {
  type        = string
  default     = "10s"
  description = "how long a new instance's checks must pass before the deployment counts it healthy"
}

variable "extra_args" {
  type        = list(string)
  default     = []
  description = "more flags for the service (see bin/<service> -h)"
}

locals {
  # Per-service settings: the only place where the six jobs differ.
  # worker marks prefill and decode (a KV transfer port, GPUs, the model).
  services = {
    frontend = {
      count = 2, cpu = 500, memory = 256, worker = false,
      args  = ["-api-keys-file", "${NOMAD_SECRETS_DIR}/api-keys"]
    }
    router = {
      count = 2, cpu = 500, memory = 512, worker = false,
      args  = concat(["-mode", "kv"], var.redis_addr == "" ? [] : ["-redis-addr", var.redis_addr])
    }
    prefill = {
      count = 1, cpu = 2000, memory = 2048, worker = true,
      args  = []
    }
    decode = {
      count = 2, cpu = 2000, memory = 2048, worker = true,
      args  = []
    }
    kvbm-controller = {
      count = 1, cpu = 250, memory = 256, worker = false,
      args  = []
    }
    planner = {
      count = 1, cpu = 250, memory = 256, worker = false,
      args  = var.nomad_addr == "" ? ["-actuator", "none"] : ["-actuator", "nomad", "-nomad-addr", var.nomad_addr]
    }
  }
  svc     = local.services[var.service]
  archive = "${var.service}-${var.version}-linux-${var.arch}"

  worker_args = ["-executor", "llama", "-model", var.model, "-tokenizer", var.tokenizer,
  "-kv-transfer-listen", "${NOMAD_ADDR_kv}"]
  # Mutual TLS (docs/security.md): the files the templates below render
  # from the Nomad Variables, and the health port, which serves /live and
  # /ready over plain HTTP for Consul's checks (they hold no mesh
  # certificate). The frontend's OpenAI API serves tls_public_cert if the
  # Variables have one, else the mesh certificate, and asks its callers
  # for none (API keys authenticate them there).
  tls_args = concat([
    "-tls-cert", "${NOMAD_SECRETS_DIR}/tls.crt",
    "-tls-key", "${NOMAD_SECRETS_DIR}/tls.key",
    "-tls-ca", "${NOMAD_SECRETS_DIR}/tls-ca.crt",
    "-health-listen", "${NOMAD_ADDR_health}",
    ], var.service != "frontend" ? [] : [
    "-public-tls-cert", "${NOMAD_SECRETS_DIR}/public.crt",
    "-public-tls-key", "${NOMAD_SECRETS_DIR}/public.key",
  ])
  # Each file and the Variable items it takes, least preferred first (a
  # later one found wins); per item, the job's own Variable wins over the
  # namespace-wide one.
  tls_files = concat([
    { file = "tls-ca.crt", items = ["tls_ca"], perms = "0644" },
    { file = "tls.crt", items = ["tls_cert"], perms = "0644" },
    { file = "tls.key", items = ["tls_key"], perms = "0600" },
    ], var.service != "frontend" ? [] : [
    { file = "public.crt", items = ["tls_cert", "tls_public_cert"], perms = "0644" },
    { file = "public.key", items = ["tls_key", "tls_public_key"], perms = "0600" },
  ])
  # The Variables a task reads without an ACL policy: the namespace's
  # nomad/jobs and its job's own. Least preferred first: later overrides.
  tls_paths = ["nomad/jobs", "nomad/jobs/switchyard-${var.service}"]

  # Flags every service takes (libs/mesh/config). The instance id carries
  # the allocation, so a canary and the instance it replaces never share
  # one discovery record. kill_timeout below exceeds -deregister-grace
  # plus -drain-timeout, so Nomad's SIGKILL never cuts a drain short.
  args = concat([
    "-id", "${var.service}-${NOMAD_SHORT_ALLOC_ID}",
    "-listen", "${NOMAD_ADDR_http}",
    "-advertise", "${NOMAD_ADDR_http}",
    "-discovery", "consul",
    "-consul-addr", var.consul_addr,
    "-deregister-grace", "2s",
    "-drain-timeout", "20s",
    "-log-format", "json",
  ], var.tls ? local.tls_args : [], local.svc.worker ? local.worker_args : [], local.svc.args, var.extra_args)
  # With TLS the main port takes mesh callers only: checks go to the
  # health port.
  check_port = var.tls ? "health" : "http"
}

job "switchyard" {
  # The label cannot be an expression: id and name carry the service.
  id          = "switchyard-${var.service}"
  name        = "switchyard-${var.service}"
  type        = "service"
  datacenters = var.datacenters

  meta {
    service = var.service
    version = var.version
  }

  # The archives are static linux binaries of one architecture.
  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }
  constraint {
    attribute = "${attr.cpu.arch}"
    value     = var.arch
  }

  # A new version starts one canary next to the running instances; it
  # takes traffic (it registers itself in Consul like any instance) while
  # the deployment waits for `nomad deployment promote`. A canary whose
  # checks fail by progress_deadline is stopped and the job reverted.
  update {
    max_parallel      = 1
    canary            = 1
    auto_promote      = false
    auto_revert       = true
    health_check      = "checks"
    min_healthy_time  = var.min_healthy_time
    healthy_deadline  = "5m"
    progress_deadline = "10m"
  }

  # dynamic only to name the group after the service (labels must be
  # literals otherwise); there is always exactly one group.
  dynamic "group" {
    for_each = [local.svc]
    labels   = [var.service]
    content {
      count = var.count > 0 ? var.count : group.value.count

      network {
        port "http" {}
        dynamic "port" {
          for_each = concat(group.value.worker ? ["kv"] : [], var.tls ? ["health"] : [])
          labels   = [port.value]
          content {}
        }
      }

      # Nomad's own record of the allocation, for its deployment health
      # and for operators; named apart from the record each process
      # registers itself as (switchyard-<service>, with role, model and
      # version meta), which the mesh reads. canary_tags mark canaries
      # here only: Nomad tells a task nothing about being one.
      service {
        name        = "switchyard-${var.service}-nomad"
        port        = "http"
        provider    = "consul"
        tags        = ["version-${var.version}"]
        canary_tags = ["canary", "version-${var.version}"]
        check {
          name     = "ready"
          type     = "http"
          port     = local.check_port
          path     = "/ready"
          interval = "5s"
          timeout  = "2s"
        }
        check {
          name     = "live"
          type     = "http"
          port     = local.check_port
          path     = "/live"
          interval = "10s"
          timeout  = "2s"
          check_restart {
            limit = 3
            grace = "30s"
          }
        }
      }

      dynamic "task" {
        for_each = [group.value]
        labels   = [var.service]
        content {
          driver       = var.driver
          kill_signal  = "SIGTERM"
          kill_timeout = "30s"

          artifact {
            source      = "${var.artifact_base}/${local.archive}.tar.gz"
            destination = "local/"
            options {
              checksum = "sha256:${var.checksum}"
            }
          }

          config {
            command = "${NOMAD_TASK_DIR}/${local.archive}/${var.service}"
            args    = local.args
          }

          env {
            OTEL_TRACES_EXPORTER = "none"
          }

          # The frontend's API keys: the api_keys item of the Nomad
          # Variable nomad/jobs/switchyard-frontend (the job's own path,
          # readable by its tasks without a policy), else the api_keys job
          # variable. With neither the file is empty and the frontend
          # refuses to start: it never serves without keys by accident.
          # It re-reads the file itself (-api-keys-reload), so a rotation
          # needs no restart.
          dynamic "template" {
            for_each = var.service == "frontend" ? ["api-keys"] : []
            content {
              destination = "${NOMAD_SECRETS_DIR}/api-keys"
              change_mode = "noop"
              perms       = "0600"
              data        = <<-EOT
                {{- $keys := "" -}}
                {{- range nomadVarList "nomad/jobs/switchyard-frontend" -}}
                {{- if eq .Path "nomad/jobs/switchyard-frontend" -}}
                {{- with nomadVar .Path -}}{{- with index . "api_keys" -}}{{- $keys = .Value -}}{{- end -}}{{- end -}}
                {{- end -}}
                {{- end -}}
                {{- if $keys -}}{{ $keys }}{{- else -}}${var.api_keys}{{- end }}
              EOT
            }
          }

          # The mesh certificates. Each item is looked up in the job's own
          # Variable, then in nomad/jobs (one set for every job of the
          # namespace); index yields an empty item, not nothing, for one
          # a Variable lacks, hence the test of its Value. A missing one
          # renders an empty file and the
          # service refuses to start (scripts/nomad-deploy.sh checks
          # first). The services re-read rotated files themselves
          # (-tls-reload-interval), so a rotation restarts nothing.
          dynamic "template" {
            for_each = var.tls ? local.tls_files : []
            content {
              destination = "${NOMAD_SECRETS_DIR}/${template.value.file}"
              change_mode = "noop"
              perms       = template.value.perms
              data        = <<-EOT
                {{- $v := "" -}}
                %{~for item in template.value.items~}
                %{~for p in local.tls_paths~}
                {{- range nomadVarList "${p}" -}}
                {{- if eq .Path "${p}" -}}
                {{- with nomadVar .Path -}}{{- with index . "${item}" -}}{{- with .Value -}}{{- $v = . -}}{{- end -}}{{- end -}}{{- end -}}
                {{- end -}}
                {{- end -}}
                %{~endfor~}
                %{~endfor~}
                {{- $v -}}
              EOT
            }
          }

          # The planner scales jobs with a workload-identity token in
          # NOMAD_TOKEN; with ACLs on, give the job a policy with
          # read-job and scale-job.
          dynamic "identity" {
            for_each = var.service == "planner" && var.nomad_addr != "" ? [1] : []
            content {
              env = true
            }
          }

          resources {
            cpu    = var.cpu > 0 ? var.cpu : task.value.cpu
            memory = var.memory > 0 ? var.memory : task.value.memory
            dynamic "device" {
              for_each = task.value.worker && var.gpus > 0 ? [var.gpus] : []
              labels   = ["nvidia/gpu"]
              content {
                count = device.value
              }
            }
          }
        }
      }
    }
  }
}
