# Multi-stage build: a static binary on a distroless base, run as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGET=./cmd/schedulerd
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/app ${TARGET}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/app /usr/local/bin/app
USER nonroot:nonroot
ENV SCHEDULER_LISTEN_ADDR=:8080 SCHEDULER_DATA_DIR=/var/lib/schedulerd
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/app"]
