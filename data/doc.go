// Package data is the home of Hilbert's training-data pipelines. Each corpus
// format lives in its own subpackage; data/fineweb holds the FineWeb path
// (llm.c .bin shards, Parquet/Arrow ingestion and the deterministic loader).
//
// Data packages turn files into token ids (int32) and know nothing of
// tensors or devices: they must not import device, tensor, autograd, nn,
// optim or models.
package data
