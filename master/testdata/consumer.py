# A tiny consumer: logs every delivery and answers 200.
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        with open('deliveries.jsonl', 'ab') as f:
            f.write(body + b'\n')
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', 9099), H).serve_forever()
