package s3store

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestParseURL: Longhorn's target URL forms (longhorn/backupstore
// s3/s3.go initFunc, s3/s3_service.go newService).
func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Target
		ok   bool
	}{
		{"s3://backups@us-east-1/", Target{Bucket: "backups", Region: "us-east-1", Prefix: ""}, true},
		{"s3://backups@us-east-1/longhorn", Target{Bucket: "backups", Region: "us-east-1", Prefix: "longhorn"}, true},
		{"s3://backups@us-east-1/longhorn/", Target{Bucket: "backups", Region: "us-east-1", Prefix: "longhorn"}, true},
		{"s3://backups@eu-west-1//a/b/", Target{Bucket: "backups", Region: "eu-west-1", Prefix: "a/b"}, true},
		{"s3://backups/longhorn", Target{Bucket: "backups", Prefix: "longhorn"}, true},
		{"s3://backups@us-east-1", Target{}, false}, // no path: Longhorn refuses it
		{"s3://@us-east-1/x", Target{}, false},
		{"nfs://server:/export", Target{}, false},
		{"s3://backups@us-east-1/a/../b", Target{}, false},
		{"s3://backups@us-east-1/a?x=1", Target{}, false},
		{"s3://backups:hunter2@us-east-1/x", Target{}, false},
		{"::not a url", Target{}, false},
	} {
		got, err := ParseURL(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%q: %v is not ErrConfig", c.in, err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the password is in %q", err)
			}
		}
	}
	if s := (Target{Bucket: "b", Region: "r", Prefix: "p/q"}).String(); s != "s3://b@r/p/q" {
		t.Errorf("String %q", s)
	}
}

// TestConfigFromEnv reads the variables of Longhorn's backup-target
// secret through the getenv it is given, and nothing else.
func TestConfigFromEnv(t *testing.T) {
	secret := map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-value", "AWS_SESSION_TOKEN": "tok",
		"AWS_ENDPOINTS": "https://minio.example:9000", "AWS_CERT": "", "VIRTUAL_HOSTED_STYLE": "false",
		"HTTP_PROXY": "http://proxy:3128", "HTTPS_PROXY": "http://proxy:3129", "NO_PROXY": "localhost,.internal",
		"AWS_REGION": "eu-central-1",
	}
	var asked []string
	c := OptionsFromEnv("s3://b@us-east-1/p", func(k string) string { asked = append(asked, k); return secret[k] })
	if c.AccessKeyID != "AKIDEXAMPLE" || c.SecretAccessKey != "s3cr3t-value" || c.SessionToken != "tok" ||
		c.Endpoint != "https://minio.example:9000" || c.VirtualHostedStyle != "false" || c.HTTPProxy != "http://proxy:3128" ||
		c.HTTPSProxy != "http://proxy:3129" || c.NoProxy != "localhost,.internal" || c.Region != "eu-central-1" || c.CACert != nil {
		t.Fatalf("%+v", c)
	}
	for _, k := range asked {
		if _, known := secret[k]; !known {
			t.Errorf("read %s, not a variable of the secret", k)
		}
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	if s.Target().Region != "us-east-1" {
		t.Fatalf("the URL's region must win over AWS_REGION: %+v", s.Target())
	}
}

// TestNewChecksUpFront: every bad setting is a ConfigError at New, and no
// error holds a credential.
func TestNewChecksUpFront(t *testing.T) {
	good := Options{URL: "s3://b@us-east-1/p", AccessKeyID: "AKID", SecretAccessKey: "very-secret-key"}
	for name, mod := range map[string]func(*Options){
		"bad URL":              func(c *Options) { c.URL = "s3://b" },
		"half credentials":     func(c *Options) { c.AccessKeyID = "" },
		"token alone":          func(c *Options) { c.AccessKeyID, c.SecretAccessKey, c.SessionToken = "", "", "t" },
		"endpoint scheme":      func(c *Options) { c.Endpoint = "ftp://x" },
		"endpoint userinfo":    func(c *Options) { c.Endpoint = "http://u:very-secret-key@x" },
		"endpoint no host":     func(c *Options) { c.Endpoint = "http://" },
		"virtual hosted style": func(c *Options) { c.VirtualHostedStyle = "yes" },
		"CA":                   func(c *Options) { c.CACert = []byte("not a certificate") },
		"proxy scheme":         func(c *Options) { c.HTTPSProxy = "ftp://proxy" },
		"page size":            func(c *Options) { c.ListPageSize = 5000 },
		"negative":             func(c *Options) { c.RequestTimeout = -1 },
		"region":               func(c *Options) { c.URL, c.Region = "s3://b/p", "us east 1" },
	} {
		c := good
		mod(&c)
		_, err := New(c)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
			continue
		}
		if strings.Contains(err.Error(), "very-secret-key") {
			t.Errorf("%s: the secret is in %q", name, err)
		}
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
}

// TestPathStyle: a custom endpoint means path style unless
// VIRTUAL_HOSTED_STYLE=true; AWS means virtual-hosted style unless
// VIRTUAL_HOSTED_STYLE=false (Longhorn's s3_service.go newInstance).
func TestPathStyle(t *testing.T) {
	for _, c := range []struct {
		endpoint, vhs string
		path          bool
	}{{"http://minio:9000", "", true}, {"http://minio:9000", "true", false}, {"", "", false}, {"", "false", true}} {
		k, err := Options{URL: "s3://b@r/p", Endpoint: c.endpoint, VirtualHostedStyle: c.vhs}.check()
		if err != nil || k.pathStyle != c.path {
			t.Errorf("endpoint %q VIRTUAL_HOSTED_STYLE %q: path style %v, %v; want %v", c.endpoint, c.vhs, k.pathStyle, err, c.path)
		}
	}
}

// TestProxies: the Config's proxies, not the process's; NO_PROXY as
// net/http reads it; loopback never proxied.
func TestProxies(t *testing.T) {
	k, err := Options{URL: "s3://b@r/p", HTTPProxy: "proxy:3128", HTTPSProxy: "https://sproxy:443", NoProxy: ".internal, 10.0.0.0/8, s3.example:9000"}.check()
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(k)
	for _, c := range []struct{ url, want string }{
		{"http://s3.amazonaws.com/b", "http://proxy:3128"},
		{"https://s3.amazonaws.com/b", "https://sproxy:443"},
		{"https://minio.internal/b", ""},
		{"https://internal/b", ""},
		{"http://10.1.2.3/b", ""},
		{"http://s3.example:9000/b", ""},
		{"http://s3.example:9001/b", "http://proxy:3128"},
		{"http://127.0.0.1:9000/b", ""},
		{"http://localhost/b", ""},
	} {
		u, _ := url.Parse(c.url)
		p, err := tr.Proxy(&http.Request{URL: u})
		got := ""
		if p != nil {
			got = p.String()
		}
		if err != nil || got != c.want {
			t.Errorf("%s: proxy %q %v, want %q", c.url, got, err, c.want)
		}
	}
}

// FuzzParseURL: no input panics; an accepted one has a bucket, a prefix
// with no leading or trailing slash and no . or .. element, and prints
// back to a URL that parses to the same target; a rejected one never
// echoes a password.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://b@r/p", "s3://b/p/", "s3://b:pw@r/p", "s3://b@r//a//b", "s3://b@r/../x", "s3://@/", "s3:/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tg, err := ParseURL(in)
		if err != nil {
			if u, perr := url.Parse(in); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) > 3 && strings.Contains(err.Error(), pw) {
					t.Fatalf("the password is in %q", err)
				}
			}
			return
		}
		if tg.Bucket == "" || strings.HasPrefix(tg.Prefix, "/") || strings.HasSuffix(tg.Prefix, "/") {
			t.Fatalf("%q: %+v", in, tg)
		}
		for _, el := range strings.Split(tg.Prefix, "/") {
			if el == "." || el == ".." || (el == "" && tg.Prefix != "") {
				t.Fatalf("%q: prefix %q", in, tg.Prefix)
			}
		}
		again, err := ParseURL(tg.String())
		if err != nil || again != tg {
			t.Fatalf("%q -> %q -> %+v %v", in, tg.String(), again, err)
		}
	})
}

// TestConfigPrintsNoCredentials: an Options logged with any verb shows no
// credential.
func TestConfigPrintsNoCredentials(t *testing.T) {
	c := Options{URL: "s3://b@r/p", AccessKeyID: "AKIDVISIBLE", SecretAccessKey: "the-secret-key", SessionToken: "the-token",
		HTTPSProxy: "http://user:proxy-password@proxy:3128"}
	for _, verb := range []string{"%v", "%+v", "%s", "%#v"} {
		out := fmt.Sprintf(verb, c)
		for _, sec := range []string{"AKIDVISIBLE", "the-secret-key", "the-token", "proxy-password"} {
			if strings.Contains(out, sec) {
				t.Errorf("%s prints %q: %s", verb, sec, out)
			}
		}
	}
	if out := fmt.Sprint(&c); strings.Contains(out, "the-secret-key") {
		t.Errorf("a *Options prints the secret: %s", out)
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		if out := fmt.Sprintf(verb, s); strings.Contains(out, "the-secret-key") || strings.Contains(out, "AKIDVISIBLE") {
			t.Errorf("a Store printed with %s shows a credential: %s", verb, out)
		}
	}
}
