package catalog

import workerv1 "switchyard.dev/gen/switchyard/worker/v1"

func fakeInfo(kind string, data []byte) *workerv1.GetModelInfoResponse {
	return &workerv1.GetModelInfoResponse{Model: "m", VocabSize: 300, ContextLength: 64, BosTokenId: 1, EosTokenId: 2, TokenizerKind: kind, Tokenizer: data}
}
