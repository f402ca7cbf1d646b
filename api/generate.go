// Package api holds the code generated from openapi.yaml for the server:
// the models, the echo ServerInterface and the embedded spec that the master
// validates requests against. Do not edit api.gen.go; change openapi.yaml and
// run `go generate ./api/... ./client/...`.
package api

//go:generate go tool oapi-codegen -config cfg.yaml ../openapi.yaml
