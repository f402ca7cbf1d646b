// Package client is the Go client of the schedulerd REST API, generated from
// openapi.yaml. Do not edit client.gen.go; change openapi.yaml and run
// `go generate ./api/... ./client/...`.
package client

//go:generate go tool oapi-codegen -config cfg.yaml ../openapi.yaml
