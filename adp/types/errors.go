package types

import (
	"strconv"
	"strings"

	"github.com/adpnode/adpnode/adp"
)

// Machine-readable reasons carried in data.reason of the errors this package
// returns (DECISIONS 18).
const (
	ReasonBadTypeName        = "bad_type_name"
	ReasonReservedPrefix     = "reserved_prefix"
	ReasonBuiltinType        = "builtin_type"
	ReasonTypeNameTooLong    = "type_name_too_long"
	ReasonNotObject          = "not_object"
	ReasonBadJSON            = "bad_json"
	ReasonUnknownField       = "unknown_field"
	ReasonMissingField       = "missing_field"
	ReasonBadField           = "bad_field"
	ReasonSchemaInvalid      = "schema_invalid"
	ReasonSchemaRemoteRef    = "schema_remote_ref"
	ReasonSchemaDraft        = "schema_draft"
	ReasonSchemaTooLarge     = "schema_too_large"
	ReasonSchemaTooExpensive = "schema_too_expensive"
	ReasonKindChange         = "kind_change"
	ReasonMaxTypes           = "max_types"
	ReasonAmbiguousDecl      = "ambiguous_declaration"
	ReasonUnknownPack        = "unknown_pack"
	ReasonUnknownPackType    = "unknown_pack_type"
	ReasonDuplicateType      = "duplicate_type"
	ReasonOverrideField      = "override_field"
	ReasonOverrideType       = "override_unknown_type"
	ReasonBadDigest          = "bad_digest"
	ReasonDigestMismatch     = "digest_mismatch"
	ReasonPackFetch          = "pack_fetch_failed"
)

// invalid returns an invalid_event error with data.reason and, when field is
// not empty, data.field.
func invalid(reason, field, msg string) *adp.Error {
	e := adp.Reason(adp.CodeInvalidEvent, reason, msg)
	if field != "" {
		e.Data["field"] = field
	}
	return e
}

// unavailable returns a pack_unavailable error with data.reason.
func unavailable(reason, msg string) *adp.Error {
	return adp.Reason(adp.CodePackUnavailable, reason, msg)
}

// withField returns err with data.field set to prefix + "." + its field (or
// prefix alone), so nested errors name their full location.
func withField(err error, prefix string) error {
	e, ok := err.(*adp.Error)
	if !ok {
		return err
	}
	f, _ := e.Data["field"].(string)
	if f == "" {
		f = prefix
	} else {
		f = prefix + "." + f
	}
	return e.WithData("field", f)
}

// quote quotes s for an error message, truncated to a readable length.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return strconv.Quote(s)
}
