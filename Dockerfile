# The courier binary (worker, sandbox and CLI) in a small non-root image.
# Build: docker build -t courier .   (docker-compose.yml builds it too)

FROM golang:1.26-alpine AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (SQLite is modernc.org/sqlite), so the binary is static.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/courier ./cmd/courier

FROM alpine:3.22
# wget (busybox) serves the compose healthchecks; ca-certificates, HTTPS
# destinations and Temporal Cloud.
RUN apk add --no-cache ca-certificates \
    && adduser -D -H -u 10001 courier \
    && mkdir /data && chown courier /data
COPY --from=build /out/courier /usr/local/bin/courier
USER 10001
WORKDIR /data
EXPOSE 9090 8081
ENTRYPOINT ["courier"]
CMD ["worker", "--destinations", "/config/destinations.json", "--metrics", ":9090"]
