package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// The console's guards: security headers, authentication, the
// cross-origin check and the CSRF token of every change.

// ServeHTTP serves the console: security headers on every answer, the
// authentication check, and on POST the cross-origin and CSRF checks.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	if h.cfg.Auth != nil && !h.cfg.Auth(r) {
		hd.Set("WWW-Authenticate", `Basic realm="claimstore console", charset="UTF-8"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if h.cfg.ReadOnly {
			http.Error(w, "the console is read-only", http.StatusMethodNotAllowed)
			return
		}
		if err := h.origins.Check(r); err != nil {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		if !h.validToken(r) {
			http.Error(w, "missing or invalid CSRF token", http.StatusForbidden)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// csrfCookie names the cookie that binds a browser to its CSRF token.
const csrfCookie = "claimstore_console"

// token returns the CSRF token of this browser, setting its cookie when
// it has none: the token is an HMAC of the cookie's random value, so a
// page of another site can neither read nor forge it.
func (h *Handler) token(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(csrfCookie)
	if err != nil || len(c.Value) != 64 {
		var b [32]byte
		_, _ = rand.Read(b[:])
		c = &http.Cookie{Name: csrfCookie, Value: hex.EncodeToString(b[:]), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
		http.SetCookie(w, c)
	}
	return h.sign(c.Value)
}

func (h *Handler) sign(v string) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

// validToken reports whether r carries the CSRF token of its cookie.
func (h *Handler) validToken(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	got := r.PostFormValue("csrf")
	return got != "" && hmac.Equal([]byte(got), []byte(h.sign(c.Value)))
}

// TokenAuth returns a [Config].Auth that accepts a request carrying token
// as "Authorization: Bearer <token>" or as the password of Basic
// authentication (any user name, so that a browser's login prompt works).
// The comparison takes constant time.
func TokenAuth(token string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if token == "" {
			return false
		}
		got := ""
		if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
			got = strings.TrimPrefix(a, "Bearer ")
		} else if _, p, ok := r.BasicAuth(); ok {
			got = p
		}
		return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
	}
}

// BasicAuth returns a [Config].Auth that accepts Basic authentication with
// user and password. The comparisons take constant time.
func BasicAuth(user, password string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		okU := subtle.ConstantTimeCompare([]byte(u), []byte(user)) == 1
		okP := subtle.ConstantTimeCompare([]byte(p), []byte(password)) == 1
		return ok && user != "" && okU && okP
	}
}
