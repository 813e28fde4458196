# Sourced by bench/proxy.sh and bench/proxy-instructions.sh: the same origin and the same
# meshlb configuration for both. Needs $W (a scratch directory) and $OPORT (the origin's port).

# The origin: an nginx worker on CPU 1 with two endpoints answering a 2-byte body.
start_origin() {
  cat > "$W/origin.conf" <<CONF
worker_processes 1;
pid $W/origin.pid;
error_log $W/origin-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  server { listen 127.0.0.21:$OPORT; location / { return 200 "ok"; } }
  server { listen 127.0.0.22:$OPORT; location / { return 200 "ok"; } }
}
CONF
  taskset -c 1 nginx -c "$W/origin.conf" -g "daemon on;"
}

# meshlb's config (one pool of the two endpoints behind www.example.test) and cluster key.
write_meshlb_config() {
  echo "the meshlb proxy benchmark cluster key" > "$W/key"
  cat > "$W/meshlb.toml" <<TOML
[[monitors]]
name = "http"
port = $OPORT
interval = 5
timeout = 2
[[pools]]
name = "web"
monitor = "http"
check_regions = ["WEU"]
origins = [{ name = "a", address = "127.0.0.21", port = $OPORT }, { name = "b", address = "127.0.0.22", port = $OPORT }]
[[load_balancers]]
name = "www.example.test"
proxied = true
default_pools = ["web"]
TOML
}

# nginx as the proxy on port $1 (one worker, keep-alive upstream to both endpoints) in
# $W/nginx.conf; $2: directives to put first.
write_nginx_proxy_config() {
  cat > "$W/nginx.conf" <<CONF
${2:-}
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream web { server 127.0.0.21:$OPORT; server 127.0.0.22:$OPORT; keepalive 128; }
  server {
    listen 127.0.0.1:$1;
    location / { proxy_pass http://web; proxy_http_version 1.1; proxy_set_header Connection "";
                 proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for; }
  }
}
CONF
}
