// Command testop is the OpenID Provider the daemon's tests sign in with: the
// certified zitadel/oidc OP with its example storage and login page, on a
// loopback port, with what a test needs to drive it from outside:
//
//	POST /test/client   {"id","secret","redirect_uris":[...],"jwt_access_tokens":bool}  register a web client
//	POST /test/rotate                                          a new signing key (the old one stays published)
//	POST /test/keys?down=1|0                                   the key set answers 503 (or again 200)
//	POST /test/disable?user=NAME                               the user can no longer sign in, refresh or use userinfo
//	POST /test/mint     {claims}                               a JWT of the claims, signed with the current key
//
// Users come from -users, a JSON file: {"alice":{"password":"...","groups":["staff"]}}
// (the user's id, its "sub", is "<name>-id"). It prints "issuer <url>" on
// stdout once it listens, and runs until stdin closes or it is signalled.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

type userSpec struct {
	Password string   `json:"password"`
	Groups   []string `json:"groups"`
	Email    string   `json:"email"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	usersFile := flag.String("users", "", "users JSON file")
	flag.Parse()
	log.SetFlags(0)
	users := map[string]userSpec{}
	if *usersFile != "" {
		data, err := os.ReadFile(*usersFile)
		if err != nil {
			log.Fatal(err)
		}
		if err := json.Unmarshal(data, &users); err != nil {
			log.Fatalf("users: %v", err)
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()

	store := &userStore{users: map[string]*storage.User{}}
	ctl := &control{groups: map[string][]string{}, disabled: map[string]bool{}, jwtClients: map[string]bool{}}
	for name, u := range users {
		email := u.Email
		if email == "" {
			email = name + "@example.com"
		}
		store.users[name+"-id"] = &storage.User{ID: name + "-id", Username: name, Password: u.Password, FirstName: name, LastName: "Test",
			Email: email, EmailVerified: true, PreferredLanguage: language.English}
		ctl.groups[name+"-id"] = u.Groups
	}
	if err := ctl.rotate(); err != nil {
		log.Fatal(err)
	}
	st := &testStorage{Storage: storage.NewStorage(store), ctl: ctl}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	router := exampleop.SetupServer(issuer, st, quiet, false)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /test/client", func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			ID           string   `json:"id"`
			Secret       string   `json:"secret"`
			RedirectURIs []string `json:"redirect_uris"`
			JWT          bool     `json:"jwt_access_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil || c.ID == "" {
			http.Error(w, "want {id, secret, redirect_uris}", http.StatusBadRequest)
			return
		}
		// A test registers a client before any request of it.
		storage.RegisterClients(storage.WebClient(c.ID, c.Secret, c.RedirectURIs...))
		if c.JWT {
			ctl.mu.Lock()
			ctl.jwtClients[c.ID] = true
			ctl.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /test/rotate", func(w http.ResponseWriter, r *http.Request) {
		if err := ctl.rotate(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"kid": ctl.current().id})
	})
	mux.HandleFunc("POST /test/keys", func(w http.ResponseWriter, r *http.Request) {
		ctl.mu.Lock()
		ctl.keysDown = r.URL.Query().Get("down") == "1"
		ctl.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /test/disable", func(w http.ResponseWriter, r *http.Request) {
		ctl.mu.Lock()
		ctl.disabled[r.URL.Query().Get("user")+"-id"] = true
		ctl.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /test/mint", func(w http.ResponseWriter, r *http.Request) {
		payload, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !json.Valid(payload) {
			http.Error(w, "want the claims as JSON", http.StatusBadRequest)
			return
		}
		k := ctl.current()
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k.key},
			(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), k.id))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		obj, err := signer.Sign(payload)
		if err == nil {
			var s string
			if s, err = obj.CompactSerialize(); err == nil {
				_, _ = io.WriteString(w, s)
				return
			}
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		ctl.mu.Lock()
		down := ctl.keysDown
		ctl.mu.Unlock()
		if down && r.URL.Path == "/keys" {
			http.Error(w, "the key set is down", http.StatusServiceUnavailable)
			return
		}
		router.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("issuer %s\n", issuer)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	_ = srv.Close()
}

// control is what a test changes from outside.
type control struct {
	mu       sync.Mutex
	keys     []*signingKey // newest first
	keysDown bool
	groups   map[string][]string // user id -> groups
	disabled map[string]bool     // user id -> disabled
	// jwtClients get JWT access tokens (aud: the client id), with the
	// user's groups.
	jwtClients map[string]bool
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ k *signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.key.PublicKey }

func (c *control) rotate() error {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys = append([]*signingKey{{id: fmt.Sprintf("key%d", len(c.keys)+1), key: k}}, c.keys...)
	return nil
}

func (c *control) current() *signingKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keys[0]
}

func (c *control) isDisabled(userID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.disabled[userID]
}

// testStorage is the example storage with the test's keys, groups and
// disabled users.
type testStorage struct {
	*storage.Storage
	ctl *control
}

func (s *testStorage) SigningKey(context.Context) (op.SigningKey, error) { return s.ctl.current(), nil }

func (s *testStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *testStorage) KeySet(context.Context) ([]op.Key, error) {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	out := make([]op.Key, 0, len(s.ctl.keys))
	for _, k := range s.ctl.keys {
		out = append(out, publicKey{k})
	}
	return out, nil
}

func (s *testStorage) CheckUsernamePassword(username, password, id string) error {
	if s.ctl.isDisabled(username + "-id") {
		return fmt.Errorf("this user is disabled")
	}
	return s.Storage.CheckUsernamePassword(username, password, id)
}

func (s *testStorage) SetUserinfoFromRequest(ctx context.Context, userinfo *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, userinfo, req, scopes); err != nil {
		return err
	}
	s.ctl.mu.Lock()
	groups := s.ctl.groups[req.GetSubject()]
	s.ctl.mu.Unlock()
	if groups != nil {
		userinfo.AppendClaims("groups", groups)
	}
	return nil
}

// jwtClient is a client whose access tokens are JWTs.
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (s *testStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	s.ctl.mu.Lock()
	jwt := s.ctl.jwtClients[id]
	s.ctl.mu.Unlock()
	if jwt {
		return jwtClient{c}, nil
	}
	return c, nil
}

func (s *testStorage) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil {
		return nil, err
	}
	s.ctl.mu.Lock()
	groups := s.ctl.groups[userID]
	s.ctl.mu.Unlock()
	if groups != nil {
		if claims == nil {
			claims = map[string]any{}
		}
		claims["groups"] = groups
	}
	return claims, nil
}

func (s *testStorage) SetUserinfoFromToken(ctx context.Context, userinfo *oidc.UserInfo, tokenID, subject, origin string) error {
	if s.ctl.isDisabled(subject) {
		return fmt.Errorf("the user is disabled")
	}
	return s.Storage.SetUserinfoFromToken(ctx, userinfo, tokenID, subject, origin)
}

func (s *testStorage) TokenRequestByRefreshToken(ctx context.Context, refreshToken string) (op.RefreshTokenRequest, error) {
	req, err := s.Storage.TokenRequestByRefreshToken(ctx, refreshToken)
	if err != nil {
		return nil, err
	}
	if s.ctl.isDisabled(req.GetSubject()) {
		return nil, op.ErrInvalidRefreshToken
	}
	return req, nil
}

// userStore holds the users of -users.
type userStore struct{ users map[string]*storage.User }

func (u *userStore) GetUserByID(id string) *storage.User { return u.users[id] }

func (u *userStore) GetUserByUsername(name string) *storage.User {
	for _, x := range u.users {
		if x.Username == name {
			return x
		}
	}
	return nil
}

func (u *userStore) ExampleClientID() string { return "service" }
