// Package data holds the training data: llm.c's .bin token shards, the
// Builder that writes them from Parquet, Arrow and text files, and the
// loaders that read them back in a deterministic, resumable order.
//
// A folder of shards carries a manifest (manifest.json: every shard's
// name, split, token count and CRC-32C), written last by a Builder, so a
// build that did not finish leaves none. NewLoader and Validation check
// their shards against it and refuse a missing, partial or changed set;
// WriteManifest makes one for shards written elsewhere.
//
// Shards are read with pread, not memory-mapped, so a file truncated
// while in use is an error naming it rather than a SIGBUS.
//
// Text files are read one way everywhere (AddTextFile): plain or gzip
// UTF-8, binary refused, one document per blank-line-separated paragraph.
//
// The package knows nothing of devices or models; it depends only on the
// tokenizer and the Arrow/Parquet readers.
package data
