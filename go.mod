module github.com/hilbert-ml/hilbert

go 1.26
