package timeline

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/zerofs/zerofs/history"
)

//go:embed static
var static embed.FS

// An Opener opens the workspace's history for one request; the server
// closes it before answering.
type Opener func(ctx context.Context) (history.Source, error)

// Options configure New.
type Options struct {
	// Token is the secret every API request must carry in its
	// X-Zerofs-Token header (see NewToken and URL).
	Token string
	// Hosts are the Host header values the server answers to: the
	// listening address as host:port (see Hosts).
	Hosts []string
	// Root names the workspace on the page.
	Root string
	// Stamp, when set, is a cheap value that changes whenever the history
	// does, read without opening the source: what the page polls, so an
	// unmounted store is not locked every two seconds (a zerofs command
	// run meanwhile would find it in use). With it comes whether the
	// workspace is mounted, that is, whether changes made in it are being
	// recorded (the stamp changes when that does). Nil: the poll opens the
	// source, and the page says the workspace is not mounted.
	Stamp func() (stamp string, mounted bool, err error)
	// Branches, when set, lists the workspace's branches (package branch,
	// through cmd/zerofs: the timeline mounts nothing): GET /api/branches.
	// Nil: the page shows none.
	Branches func(ctx context.Context) ([]Branch, error)
	// Logger receives failures the page cannot show. Default slog.Default().
	Logger *slog.Logger
}

// Server is the timeline's http.Handler.
type Server struct {
	open  Opener
	opts  Options
	mux   *http.ServeMux
	files http.Handler
	// mu serialises the requests that open the source: an unmounted
	// store's lock is taken by one open at a time.
	mu sync.Mutex
}

// New is the timeline over the history open opens.
func New(open Opener, opts Options) (*Server, error) {
	if len(opts.Token) < 16 {
		return nil, errors.New("timeline: token too short")
	}
	if len(opts.Hosts) == 0 {
		return nil, errors.New("timeline: no hosts")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	s := &Server{open: open, opts: opts, mux: http.NewServeMux(), files: http.FileServerFS(sub)}
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.Handle("GET /static/", http.StripPrefix("/static", s.files))
	s.mux.HandleFunc("GET /api/head", s.head)
	s.mux.HandleFunc("GET /api/log", s.log)
	s.mux.HandleFunc("GET /api/diff", s.diff)
	s.mux.HandleFunc("POST /api/rewind", s.rewind)
	s.mux.HandleFunc("GET /api/branches", s.branches)
	return s, nil
}

// NewToken is a random token: 128 bits, hex.
func NewToken() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// URL is the address that opens the page at host (host:port) with token:
// the token in the fragment, which the browser keeps to the page and
// sends to no server.
func URL(host, token string) string {
	return "http://" + host + "/#token=" + token
}

// Hosts are the Host values that name addr, a listening address: itself,
// and for a loopback address also localhost with its port.
func Hosts(addr net.Addr) []string {
	hosts := []string{addr.String()}
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		hosts = append(hosts, net.JoinHostPort("localhost", strconv.Itoa(ta.Port)))
	}
	return hosts
}

// public says whether r asks for the page itself (its HTML, scripts and
// styles, the same for everyone, embedded in the binary), which a browser
// fetches without the token: the token travels in the URL's fragment,
// which no browser sends. Everything else (the history, the actions)
// needs the token.
func public(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/static/"))
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if !slices.Contains(s.opts.Hosts, r.Host) {
		http.Error(w, "forbidden: unknown Host "+r.Host, http.StatusForbidden)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		http.Error(w, "forbidden: cross-origin request", http.StatusForbidden)
		return
	}
	// The header only: never a cookie (a browser sends a host's cookies
	// to every port of it) nor the query (it lands in logs and history).
	if !public(r) && !s.valid(r.Header.Get("X-Zerofs-Token")) {
		http.Error(w, "forbidden: missing or wrong token (open the URL zerofs ui printed)", http.StatusForbidden)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) valid(tok string) bool {
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.Token)) == 1
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	b, err := static.ReadFile("static/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

// withSource opens the source, runs fn and closes it, one at a time.
func (s *Server) withSource(ctx context.Context, fn func(history.Source) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.open(ctx)
	if err != nil {
		return err
	}
	ferr := fn(src)
	cerr := src.Close()
	if ferr != nil {
		return ferr
	}
	return cerr
}
