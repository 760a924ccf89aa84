package settings

import (
	"fmt"
	"strings"
)

// Reference writes the commented reference configuration file: every
// setting with its help, flag, environment variable and default.
func (t Table) Reference(header, footer string) []byte {
	var b strings.Builder
	b.WriteString(header)
	for i := range t {
		s := &t[i]
		depth := strings.Count(s.Key, ".")
		ind := strings.Repeat("  ", depth)
		name := s.Key[strings.LastIndex(s.Key, ".")+1:]
		if i == 0 || t[i-1].Kind != Group {
			b.WriteString("\n")
		}
		comment(&b, ind, s.Help+where(s))
		switch {
		case s.Kind == Group:
			fmt.Fprintf(&b, "%s%s:\n", ind, name)
		case s.Example != "":
			fmt.Fprintf(&b, "%s# %s: %s\n", ind, name, s.Example)
		case s.Kind == List:
			l := splitList(s.Default)
			if len(l) == 0 {
				fmt.Fprintf(&b, "%s%s: []\n", ind, name)
				continue
			}
			fmt.Fprintf(&b, "%s%s:\n", ind, name)
			for _, e := range l {
				fmt.Fprintf(&b, "%s  - %s\n", ind, e)
			}
		case s.Default == "":
			fmt.Fprintf(&b, "%s%s: \"\"\n", ind, name)
		default:
			fmt.Fprintf(&b, "%s%s: %s\n", ind, name, s.Default)
		}
	}
	if footer != "" {
		b.WriteString("\n")
		comment(&b, "", footer)
	}
	return []byte(b.String())
}

// where names the flag and environment variable of a setting.
func where(s *Setting) string {
	if s.Kind == Group {
		return ""
	}
	if s.Flag == "" {
		return " (" + s.Env() + ")"
	}
	if s.Invert {
		return " (flag --" + s.Flag + " turns it off; " + s.Env() + ")"
	}
	return " (flag --" + s.Flag + "; " + s.Env() + ")"
}

// comment writes text as YAML comment lines of at most 78 columns.
func comment(b *strings.Builder, ind, text string) {
	line := ind + "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 78 && line != ind+"#" {
			b.WriteString(line + "\n")
			line = ind + "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}

// Markdown writes the settings table of the docs.
func (t Table) Markdown(intro string) []byte {
	var b strings.Builder
	b.WriteString(intro)
	b.WriteString("\n| key | flag | environment | kind | default | meaning |\n|---|---|---|---|---|---|\n")
	for i := range t {
		s := &t[i]
		if s.Kind == Group {
			continue
		}
		flag := ""
		if s.Flag != "" {
			flag = "`--" + s.Flag + "`"
			if s.Invert {
				flag += " (off)"
			}
		}
		def := "`" + s.Default + "`"
		switch {
		case s.Default == "" || s.Kind == List && len(splitList(s.Default)) == 0:
			def = "—"
		case s.Kind == List:
			def = "`" + strings.Join(splitList(s.Default), "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s | %s | %s |\n", s.Key, flag, s.Env(), s.Kind, def,
			strings.ReplaceAll(s.Help, "|", "\\|"))
	}
	return []byte(b.String())
}
