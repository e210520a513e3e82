"""An embedding server for Weir's tests: a real small model (WordLlama
l2_supercat, 256 dimensions, weights from its PyPI wheel) behind the HTTP
shapes embed-text speaks: OpenAI-compatible POST /v1/embeddings, Ollama's
POST /api/embed and text-embeddings-inference's POST /embed. GET /health
answers 200 once the model is loaded. Vectors are L2-normalized.
Usage: server.py PORT"""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import wordllama
from wordllama import WordLlama

# The wheel ships the weights and the tokenizer; pointing the cache at the
# package makes WordLlama find both without reaching Hugging Face.
MODEL = WordLlama.load(cache_dir=os.path.dirname(wordllama.__file__), disable_download=True)
NAME = "wordllama-l2-supercat-256"


def embed(texts):
    vectors = np.asarray(MODEL.embed(list(texts)), dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1
    return (vectors / norms).round(6).tolist()


class Handler(BaseHTTPRequestHandler):
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.answer(200, {"model": NAME})
        else:
            self.answer(404, {"error": "no such route"})

    def read_body(self):
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length", "0")))

    def do_POST(self):
        try:
            request = json.loads(self.read_body() or b"{}")
        except ValueError as e:
            return self.answer(400, {"error": f"not JSON: {e}"})
        texts = request.get("input", request.get("inputs"))
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return self.answer(400, {"error": "input must be a string or a list of strings"})
        if self.path == "/v1/embeddings":
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(embed(texts))]
            self.answer(200, {"object": "list", "data": data, "model": request.get("model", NAME),
                              "usage": {"prompt_tokens": 0, "total_tokens": 0}})
        elif self.path == "/api/embed":
            self.answer(200, {"model": request.get("model", NAME), "embeddings": embed(texts)})
        elif self.path == "/embed":
            self.answer(200, embed(texts))
        else:
            self.answer(404, {"error": "no such route"})

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
