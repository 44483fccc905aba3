package consuldisc

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/discovery"
)

// fuzzTags and fuzzMeta read a fuzzer's strings as tags ("a,b") and
// meta ("k=v" lines); they keep empty tags and any key, as an agent
// hands back whatever was registered.
func fuzzTags(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func fuzzMeta(s string) map[string]string {
	meta := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			meta[k] = v
		}
	}
	return meta
}

// FuzzFromEntry: whatever service an agent reports (another program's,
// a hand-made one, an older Switchyard's), decoding it does not panic,
// takes the Instance fields from their meta keys, and leaves none of the
// backend's own keys in the instance's meta.
func FuzzFromEntry(f *testing.F) {
	f.Add("sy-decode-1", "10.0.0.5", 9100, "canary", "switchyard_role=decode\nswitchyard_model=tiny\nswitchyard_version=1.2.3\nswitchyard_owner=x\nkv_blocks=512")
	f.Add("", "", 0, "", "")
	f.Add("sy-x", "::1", 65535, ",,", "=\n==\nswitchyard_role=")
	f.Add("other", "host.example", -1, "a,b", "no-equals")
	f.Fuzz(func(t *testing.T, id, addr string, port int, tags, meta string) {
		m := fuzzMeta(meta)
		in := fromEntry(&api.AgentService{ID: id, Address: addr, Port: port, Tags: fuzzTags(tags), Meta: maps.Clone(m)})
		if in.ID != id || in.Role != m[metaRole] || in.Model != m[metaModel] || in.Version != m[metaVersion] {
			t.Fatalf("fromEntry took %+v from id %q meta %q", in, id, m)
		}
		if want := net.JoinHostPort(addr, strconv.Itoa(port)); in.Address != want {
			t.Fatalf("address %q, want %q", in.Address, want)
		}
		for k := range in.Meta {
			if reservedMetaKey(k) {
				t.Fatalf("the backend's key %q left in the instance's meta %q", k, in.Meta)
			}
		}
		if in.Meta != nil && len(in.Meta) == 0 || in.Tags != nil && len(in.Tags) == 0 {
			t.Fatalf("empty but not nil: tags %q, meta %q", in.Tags, in.Meta)
		}
	})
}

// FuzzServiceRoundTrip: an instance that can register comes back from
// the agent as it was registered (its address in canonical form), or
// registering refuses it; nothing is lost or changed on the way.
func FuzzServiceRoundTrip(f *testing.F) {
	f.Add("decode-1", discovery.RoleDecode, "tiny", "1.2.3", "10.0.0.5:9100", "canary", "kv_blocks=512\nblock_size=16")
	f.Add("router-a", discovery.RoleRouter, "", "", "[::1]:8080", "", "")
	f.Add("p", discovery.RolePrefill, "m", "v", "h:080", "a,,b", "switchyard_role=evil")
	f.Add("k", "kvbm-controller", "", "0", "host.example:1", "", "bad key=v")
	r := &Registry{cfg: Config{ServicePrefix: "sy-"}}
	f.Fuzz(func(t *testing.T, id, role, model, version, addr, tags, meta string) {
		in := discovery.Instance{ID: id, Role: role, Model: model, Version: version, Address: addr, Tags: fuzzTags(tags), Meta: fuzzMeta(meta)}
		if in.Validate() != nil {
			return
		}
		reg, err := r.agentService(in, "check", "owner")
		if err != nil {
			for k := range in.Meta {
				if !validMetaKey(k) || reservedMetaKey(k) {
					return // refused for a reason
				}
			}
			t.Fatalf("agentService refused %+v: %v", in, err)
		}
		if reg.Name != r.serviceName(role) || reg.Meta[metaOwner] != "owner" {
			t.Fatalf("registered as %q with owner %q", reg.Name, reg.Meta[metaOwner])
		}
		// What the agent stores and hands back (fake_test.go's Entries).
		svc := &api.AgentService{ID: reg.ID, Service: reg.Name, Address: reg.Address, Port: reg.Port, Tags: slices.Clone(reg.Tags), Meta: maps.Clone(reg.Meta)}
		got := fromEntry(svc)
		got.ID = r.instanceID(got.ID)
		want := in.Clone()
		want.Address = canonical(t, in.Address)
		if len(want.Tags) == 0 {
			want.Tags = nil
		}
		if len(want.Meta) == 0 {
			want.Meta = nil
		}
		if !discovery.Equal([]discovery.Instance{got}, []discovery.Instance{want}) {
			t.Fatalf("registered %+v, came back %+v", want, got)
		}
	})
}

// canonical is addr as host and decimal port: "h:080" and "h:80" name one
// endpoint.
func canonical(t *testing.T, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("valid address %q: %v", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("valid address %q: %v", addr, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(p))
}
