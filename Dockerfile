# Two images from one build: the product (the default target: courier, the
# worker and the CLI) and the lab (courier-lab beside courier: the sandbox
# destinations docker-compose runs). Only the product goes to production.
# Build: docker build -t courier .   (docker-compose.yml builds both)

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (SQLite is modernc.org/sqlite), so the binaries are static.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/courier ./cmd/courier

FROM build AS build-lab
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/courier-lab ./cmd/courier-lab

FROM alpine:3.22 AS runtime
# wget (busybox) serves the compose healthchecks; ca-certificates, HTTPS
# destinations and Temporal Cloud.
RUN apk add --no-cache ca-certificates \
    && adduser -D -H -u 10001 courier \
    && mkdir /data && chown courier /data
USER 10001
WORKDIR /data

# The lab runs courier as its workers and clients, so it carries both.
FROM runtime AS lab
COPY --from=build /out/courier /usr/local/bin/courier
COPY --from=build-lab /out/courier-lab /usr/local/bin/courier-lab
EXPOSE 8081
ENTRYPOINT ["courier-lab"]
CMD ["sandbox", "--addr", "0.0.0.0:8081", "--db", "/data/sandbox.db"]

FROM runtime AS product
COPY --from=build /out/courier /usr/local/bin/courier
EXPOSE 9090
ENTRYPOINT ["courier"]
CMD ["worker", "--destinations", "/config/destinations.json", "--metrics", ":9090"]
