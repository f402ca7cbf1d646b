# Multi-stage build: a static binary on a distroless base, run as non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGET=./cmd/schedulerd
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/app ${TARGET}
# The data directory, created here because the runtime image has no shell;
# it is copied owned by nonroot (65532), which could not create it itself.
RUN install -d -m 0700 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/app /usr/local/bin/app
COPY --from=build --chown=65532:65532 /out/data /var/lib/schedulerd
USER nonroot:nonroot
ENV SCHEDULER_LISTEN_ADDR=:8080 SCHEDULER_DATA_DIR=/var/lib/schedulerd
VOLUME ["/var/lib/schedulerd"]
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/app"]
