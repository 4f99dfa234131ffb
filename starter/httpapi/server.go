// Package httpapi is Courier's front door over plain HTTP (`courier api`):
// a service with no Temporal SDK asks for a delivery with an
// Idempotency-Key header, and the server starts or joins it through the
// starter, exactly as a Go service would. It is the starter's role (what
// services call) in another protocol, so it lives beside it. The bearer
// token decides the tenant; nothing a caller sends can choose another.
package httpapi

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"golang.org/x/time/rate"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/starter"
)

// OpenAPI is the API's OpenAPI 3.1 document, served at /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// Limits and timeouts of the server.
const (
	// DefaultWait is how long a POST waits for its delivery to settle
	// before it answers 202; a caller may shorten it (Prefer: wait=N).
	DefaultWait = 30 * time.Second
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 16 << 10
	// healthTimeout bounds the check that Temporal answers, before a start.
	healthTimeout = 2 * time.Second
	// readTimeout bounds reading a request's headers and body.
	readTimeout = 15 * time.Second
	// answerTimeout bounds a read (status, destinations) on Temporal.
	answerTimeout = 10 * time.Second
	// unavailableRetry is the Retry-After of a 503.
	unavailableRetry = 5
)

// Options configure a Server.
type Options struct {
	// Temporal is the client the starter uses; the server asks it whether
	// Temporal answers (readiness, and before each start).
	Temporal client.Client
	Starter  *starter.Client
	Config   Config
	// Destinations, when set, is the workers' destinations file: a POST to
	// a destination it does not name is refused (404), and GET
	// /v1/destinations lists its destinations too.
	Destinations *destinations.Config
	// Wait is the longest a POST waits; zero: DefaultWait.
	Wait   time.Duration
	Logger *slog.Logger
}

// Server is the HTTP API.
type Server struct {
	o       Options
	creds   credentials // bearer tokens
	certs   credentials // client certificates
	mux     *http.ServeMux
	limits  map[string]*rate.Limiter // by tenant, each one the file names
	metrics *prom.Registry
	served  *prom.CounterVec
	latency *prom.HistogramVec
	// stopping is done once the server shuts down: waits end early and
	// answer what they have (202 with the delivery's Location).
	stopping context.Context
	stop     context.CancelFunc
	once     sync.Once
}

// New builds the server; Config must be valid (LoadConfig checks it).
func New(o Options) (*Server, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o, creds: newCredentials(o.Config.Callers, false), certs: newCredentials(o.Config.Callers, true), mux: http.NewServeMux(),
		limits: map[string]*rate.Limiter{}, metrics: prom.NewRegistry()}
	s.stopping, s.stop = context.WithCancel(context.Background())
	rl := o.Config.RateLimit
	if rl == (RateLimit{}) {
		rl = DefaultRateLimit
	}
	for _, c := range o.Config.Callers {
		if s.limits[c.Tenant] == nil {
			s.limits[c.Tenant] = rate.NewLimiter(rate.Limit(rl.PerSecond), rl.Burst)
		}
	}
	s.served = prom.NewCounterVec(prom.CounterOpts{Name: "courier_api_requests_total",
		Help: "HTTP API requests answered, by route and status code."}, []string{"route", "code"})
	s.latency = prom.NewHistogramVec(prom.HistogramOpts{Name: "courier_api_request_duration_seconds",
		Help: "Time to answer an HTTP API request, by route.", Buckets: prom.ExponentialBuckets(0.005, 2, 14)}, []string{"route"})
	s.metrics.MustRegister(s.served, s.latency, prom.NewGoCollector(), prom.NewProcessCollector(prom.ProcessCollectorOpts{}))
	for _, rt := range s.routes() {
		h := rt.handler
		if rt.auth {
			h = s.authenticated(rt.tenantHandler)
		}
		s.mux.Handle(rt.pattern(), h)
	}
	return s, nil
}

// route is one documented route: the OpenAPI document lists exactly these,
// with these statuses (TestOpenAPIMatchesRoutes).
type route struct {
	method, path string
	statuses     []int
	auth         bool
	handler      http.Handler
	// tenantHandler serves a route with auth, given the caller's tenant.
	tenantHandler func(http.ResponseWriter, *http.Request, string)
}

func (rt route) pattern() string { return rt.method + " " + rt.path }

// Paths of the API.
const (
	PathDeliver      = "/v1/destinations/{destination}/operations/{operation}"
	PathDelivery     = "/v1/deliveries/{key}"
	PathDestinations = "/v1/destinations"
	PathOpenAPI      = "/v1/openapi.json"
	PathHealth       = "/healthz"
	PathReady        = "/readyz"
	PathMetrics      = "/metrics"
)

// authed are the statuses every route that takes a token may answer.
var authed = []int{http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}

func (s *Server) routes() []route {
	return []route{
		{method: http.MethodPost, path: PathDeliver, auth: true, tenantHandler: s.deliver, statuses: append([]int{
			http.StatusOK, http.StatusCreated, http.StatusAccepted, http.StatusBadRequest, http.StatusNotFound,
			http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity, http.StatusBadGateway}, authed...)},
		{method: http.MethodGet, path: PathDelivery, auth: true, tenantHandler: s.delivery, statuses: append([]int{
			http.StatusOK, http.StatusBadRequest, http.StatusNotFound}, authed...)},
		{method: http.MethodGet, path: PathDestinations, auth: true, tenantHandler: s.destinations, statuses: append([]int{
			http.StatusOK}, authed...)},
		{method: http.MethodGet, path: PathOpenAPI, handler: http.HandlerFunc(s.openAPI), statuses: []int{http.StatusOK}},
		{method: http.MethodGet, path: PathHealth, handler: http.HandlerFunc(s.health), statuses: []int{http.StatusOK}},
		{method: http.MethodGet, path: PathReady, handler: http.HandlerFunc(s.ready), statuses: []int{http.StatusOK, http.StatusServiceUnavailable}},
		{method: http.MethodGet, path: PathMetrics, handler: promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{}), statuses: []int{http.StatusOK}},
	}
}

// ServeHTTP routes r, answering an unknown path or method with a problem,
// and counts every answer by route and status.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	_, pattern := s.mux.Handler(r)
	if pattern == "" {
		pattern = "unmatched"
		s.unmatched(rec, r)
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	took := time.Since(start)
	s.served.WithLabelValues(pattern, strconv.Itoa(rec.code)).Inc()
	s.latency.WithLabelValues(pattern).Observe(took.Seconds())
	// The route, not the path: a path holds a caller's key or names.
	s.o.Logger.Debug("api: answered", "method", r.Method, "route", pattern, "status", rec.code, "took", took)
}

// unmatched is 405 for a known path asked with another method, else 404.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		other := r.Clone(r.Context())
		other.Method = m
		if _, p := s.mux.Handler(other); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", allow[0])
		writeProblem(w, problem{Type: typeMethod, Status: http.StatusMethodNotAllowed,
			Detail: r.Method + " is not served here; use " + allow[0]})
		return
	}
	writeProblem(w, problem{Type: typeNotFound, Status: http.StatusNotFound,
		Detail: "no such route; the API is described at " + PathOpenAPI})
}

// recorder keeps the status a handler answered.
type recorder struct {
	http.ResponseWriter
	code int
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// NewHTTPServer is an http.Server for s with its limits and timeouts; the
// write timeout leaves room for the longest wait.
func (s *Server) NewHTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       readTimeout,
		WriteTimeout:      s.o.Wait + answerTimeout + readTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.o.Logger.Handler(), slog.LevelWarn),
	}
}

// Serve answers on ln until ctx ends, then shuts down gracefully: it stops
// accepting, ends every wait early (each caller gets its delivery's
// Location, a start made is never lost) and answers every request it had
// accepted before it returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := s.NewHTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.o.Logger.Info("api: serving", "address", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.o.Logger.Info("api: shutting down; answering the requests in flight")
	s.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), answerTimeout+readTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Stop ends every wait in flight, as a shutdown does.
func (s *Server) Stop() { s.once.Do(s.stop) }

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// ready is 200 while Temporal answers, else 503.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.temporalUp(r.Context()); err != nil {
		s.o.Logger.Warn("api: Temporal does not answer", "error", err)
		w.Header().Set("Retry-After", strconv.Itoa(unavailableRetry))
		writeProblem(w, unavailable())
		return
	}
	s.health(w, r)
}

// temporalUp checks that Temporal answers, within healthTimeout.
func (s *Server) temporalUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	_, err := s.o.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}
