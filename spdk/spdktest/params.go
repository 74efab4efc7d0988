package spdktest

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/caretaker-storage/caretaker/spdk/spdkrpc"
)

// How SPDK's handlers read their params, and what they answer when the
// params cannot be read. Every served handler decodes with
// spdk_json_decode_object (lib/json/json_util.c), which fails on anything
// but an object, on a member without a decoder (exact, case-sensitive
// names), on a member of the wrong JSON type (a string decoder takes no
// null, a uint64 decoder no sign and no fraction) and on a missing
// required member. On failure each handler answers "spdk_json_decode_object
// failed" with a code of its own choosing:
//
//   - -32603 (SPDK_JSONRPC_ERROR_INTERNAL_ERROR): the lvol handlers in
//     module/bdev/lvol/vbdev_lvol_rpc.c and rpc_bdev_get_bdevs in
//     lib/bdev/bdev_rpc.c;
//   - -32700 (SPDK_JSONRPC_ERROR_PARSE_ERROR): rpc_bdev_raid_get_bdevs and
//     rpc_bdev_raid_delete in module/bdev/raid/bdev_raid_rpc.c.
//
// A request without params, or with params null, reaches the handler with
// no params (lib/jsonrpc/jsonrpc_server.c parse_single_request): the list
// methods then list everything, the others fail to decode.

const msgDecodeFailed = "spdk_json_decode_object failed"

// errDecodeFailed is the reply of a handler whose params did not decode.
func errDecodeFailed(code int) *rpcError { return &rpcError{code, msgDecodeFailed} }

// decodeObject decodes params into v as spdk_json_decode_object would
// accept them: an object whose member names are all in names, no member
// null, each of the type v's field has. v's fields are pointers, so a
// caller tells an absent member from an empty one and checks the required
// ones itself. It reports whether SPDK would have decoded params.
func decodeObject(params json.RawMessage, v any, names ...string) bool {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(params, &members); err != nil || members == nil {
		return false // not an object
	}
	for name, raw := range members {
		// encoding/json matches names case-insensitively; SPDK does not.
		if !slices.Contains(names, name) || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			return false
		}
	}
	return json.Unmarshal(params, v) == nil
}

// Params of the served methods, with SPDK's member names (the decoder
// tables of each handler).
type (
	nameParams struct {
		Name *string `json:"name"`
	}
	getBdevsParams struct {
		Name    *string `json:"name"`
		Timeout *uint64 `json:"timeout"`
	}
	lvstoreParams struct {
		UUID    *string `json:"uuid"`
		LvsName *string `json:"lvs_name"`
	}
	lvolsParams struct {
		LvsUUID *string `json:"lvs_uuid"`
		LvsName *string `json:"lvs_name"`
	}
	raidGetParams struct {
		Category *string `json:"category"`
	}
	getXattrParams struct {
		Name      *string `json:"name"`
		XattrName *string `json:"xattr_name"`
	}
	setXattrParams struct {
		Name       *string `json:"name"`
		XattrName  *string `json:"xattr_name"`
		XattrValue *string `json:"xattr_value"`
	}
)

// decodeName decodes the {"name"} params of the delete and checksum
// methods: name is required.
func decodeName(params json.RawMessage, failCode int) (string, *rpcError) {
	var p nameParams
	if !hasParams(params) || !decodeObject(params, &p, "name") || p.Name == nil {
		return "", errDecodeFailed(failCode)
	}
	return *p.Name, nil
}

// Codes SPDK answers that package spdkrpc has no constant for.
const (
	// codeEINVAL is -EINVAL, sent with strerror's "Invalid argument".
	codeEINVAL = -22
)

func errInvalidArgument() *rpcError { return &rpcError{codeEINVAL, "Invalid argument"} }

// errNoXattr is what rpc_bdev_lvol_get_xattr answers for an xattr the lvol
// does not have: the blobstore's -ENOENT, sent as an internal error with
// strerror's message. go-spdk-helper's BdevLvolGetWithFilter tells a
// missing xattr by exactly this code and message.
func errNoXattr() *rpcError {
	return &rpcError{spdkrpc.CodeInternalError, "No such file or directory"}
}
