# Switchyard kvbm-controller — Nomad job (Nomad ≥ 1.4; tested syntax: Nomad 1.6, MPL).
# Canary rollout: a new version starts one canary tagged "canary" in Consul
# (routers and frontends can steer test traffic to it with hints), and the
# deployment waits for manual promotion: `nomad deployment promote <id>`.
variable "version"    { type = string }
variable "artifact"   { type = string } # URL of the kvbm-controller binary for this version
variable "redis_addr" {
  type    = string
  default = ""
}
variable "model_path" {
  type    = string
  default = ""
}

job "switchyard-kvbm-controller" {
  type = "service"

  update {
    max_parallel      = 1
    canary            = 1
    auto_promote      = false
    auto_revert       = true
    health_check      = "checks"
    min_healthy_time  = "10s"
    healthy_deadline  = "5m"
    progress_deadline = "10m"
  }

  group "kvbm-controller" {
    count = 1

    network {
      port "http" {}
    }

    # The service registers itself in Consul (TTL check, role/model/version
    # meta); Nomad only restarts it when its own health endpoint fails.
    task "kvbm-controller" {
      driver = "exec"

      artifact {
        source      = var.artifact
        destination = "local/"
      }

      config {
        command = "local/kvbm-controller"
        args = ["-listen", "0.0.0.0:${NOMAD_PORT_http}", "-advertise", "${NOMAD_ADDR_http}", "-discovery", "consul", "-deregister-grace", "2s", "-consul-addr", "${attr.unique.network.ip-address}:8500"]
      }

      env {
        OTEL_TRACES_EXPORTER = "none"
      }

      service {
        name     = "switchyard-kvbm-controller-nomad"
        port     = "http"
        provider = "nomad"
        tags     = ["version-${var.version}"]
        canary_tags = ["canary"]
        check {
          type     = "http"
          path     = "/ready"
          interval = "5s"
          timeout  = "2s"
        }
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "30s" # longer than -deregister-grace plus -drain-timeout

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}
