"""TcpForward: makes a server that listens on 127.0.0.1 (the API-server
stand-in) reachable from pods on the CNI bridge, at the bridge's own address
(the pods' gateway): each connection there is relayed to the target. Only
this machine and its pods can reach that address."""
import socket
import threading


class TcpForward:
    def __init__(self, listen_ip, target):
        self.target = target
        self.sock = socket.create_server((listen_ip, 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://{listen_ip}:{self.port}"
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.target, timeout=10)
            except OSError:
                conn.close()
                continue
            up.settimeout(None)
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.sock.close()
