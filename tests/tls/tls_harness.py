"""TLS for the integration tests (stdlib only): a throwaway CA made at run time by make-test-ca.sh (the
openssl command line), and nginx from Debian terminating TLS in front of plain-HTTP processes (Anvil, the
seller) with those certificates.

    ca = make_ca(workdir)                       # {name: path}: ca.pem, localhost.pem/.key, expired.pem, ...
    proxy = Nginx(workdir, [Front(port, ca, "localhost", "http://127.0.0.1:8545")]).start()
    context = client_context(ca["ca.pem"])      # ssl.SSLContext trusting the test CA only
"""

import os
import ssl
import subprocess
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import harness  # noqa: E402

NGINX_BIN = os.environ.get("NGINX_BIN", "/usr/sbin/nginx")


def make_ca(workdir):
    """Runs make-test-ca.sh into workdir/ca; returns a dict from file name to path."""
    directory = os.path.join(workdir, "ca")
    subprocess.run(["bash", os.path.join(HERE, "make-test-ca.sh"), directory], check=True,
                   capture_output=True, timeout=60)
    return {name: os.path.join(directory, name) for name in os.listdir(directory)}


def client_context(ca_file):
    context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


@dataclass
class Front:
    """One nginx server on 127.0.0.1:port proxying to `upstream` (http:// or https://): TLS with
    certificate `cert` (a make-test-ca.sh name, e.g. "localhost" or "expired"), or plain HTTP when
    cert is None."""
    port: int
    cert: object
    upstream: str


class Nginx(harness.ManagedProcess):
    """nginx -g 'daemon off;' with every file it writes under workdir/nginx-NAME."""

    def __init__(self, workdir, ca, fronts, name="nginx"):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.fronts = list(fronts)
        servers = []
        for front in self.fronts:
            tls = ""
            if front.cert is not None:
                tls = " ssl;\n        ssl_certificate %s;\n        ssl_certificate_key %s" % (
                    ca[front.cert + ".pem"], ca[front.cert + ".key"])
            servers.append("""
    server {
        listen 127.0.0.1:%d%s;
        access_log %s;
        location / {
            proxy_pass %s;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 120s;
        }
    }""" % (front.port, tls, self.access_log(front.port), front.upstream))
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(d)s/client_body;
    proxy_temp_path %(d)s/proxy;
    fastcgi_temp_path %(d)s/fastcgi;
    uwsgi_temp_path %(d)s/uwsgi;
    scgi_temp_path %(d)s/scgi;
    keepalive_requests 100000;
%(servers)s
}
""" % {"d": self.dir, "servers": "\n".join(servers)})
        super().__init__(name, [NGINX_BIN, "-p", self.dir, "-c", conf, "-e", os.path.join(self.dir, "error.log"),
                                "-g", "daemon off;"], os.path.join(self.dir, "stdout.log"))

    def access_log(self, port):
        """The file where the server on `port` logs each request (one line each)."""
        return os.path.join(self.dir, "access-%d.log" % port)

    def requests(self, port):
        try:
            with open(self.access_log(port)) as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    def pids(self):
        """The master and its workers."""
        children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.popen.pid)], capture_output=True,
                                  text=True, check=False).stdout.split()
        return [self.popen.pid] + [int(pid) for pid in children]

    def signal_all(self, signum):
        for pid in self.pids():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def start(self, timeout=harness.READY_TIMEOUT_S):
        # nginx prints nothing when it starts: ready is every port accepting connections.
        super().start(ready_text=None, timeout=timeout)
        for front in self.fronts:
            if not harness.wait_port(front.port, timeout):
                with open(os.path.join(self.dir, "error.log")) as f:
                    errors = f.read()[-2000:]
                self.kill9()
                raise harness.ProcessError("nginx is not listening on %d: %s" % (front.port, errors))
        return self
