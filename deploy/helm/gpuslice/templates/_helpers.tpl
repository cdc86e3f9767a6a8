{{/*
The certificates for tls.source=helm, as JSON:
{extender|webhook|scheduler: {cert, key, ca}}, ca being the issuer of cert.
Two CAs: the serving CA issues the extender's and the webhook's serving
certificates (trusted by kube-scheduler and the API server); the client CA
issues kube-scheduler's client certificate and nothing else, because the
extender takes any clientAuth certificate its --client-ca issued as
kube-scheduler (and genSignedCert gives every certificate clientAuth).
Made once per render (kept in the root context, which Helm shares between
templates) so that the Secrets, caBundle and checksums agree. An upgrade keeps
the release's Secrets (lookup) unless tls.helm.rotate is true; `helm template`
sees no cluster and always makes new ones. The CA keys are dropped.
*/}}
{{- define "gpuslice.certs" -}}
{{- if not (hasKey . "gpusliceCerts") -}}
{{- $ns := .Values.namespace -}}
{{- $have := dict -}}
{{- range $k, $name := dict "extender" "gpuslice-extender-tls" "webhook" "gpuslice-webhook-tls" "scheduler" "gpuslice-scheduler-client-tls" -}}
{{- $s := lookup "v1" "Secret" $ns $name -}}
{{- if and $s $s.data -}}
{{- $_ := set $have $k (dict "cert" (index $s.data "tls.crt" | b64dec) "key" (index $s.data "tls.key" | b64dec) "ca" (index $s.data "ca.crt" | b64dec)) -}}
{{- end -}}
{{- end -}}
{{- if and (eq (len $have) 3) (not .Values.tls.helm.rotate) -}}
{{- $_ := set . "gpusliceCerts" $have -}}
{{- else -}}
{{- $days := int .Values.tls.helm.days -}}
{{- $serving := genCA "gpuslice-serving-ca" $days -}}
{{- $client := genCA "gpuslice-scheduler-client-ca" $days -}}
{{- $c := dict -}}
{{- range $svc := list "extender" "webhook" -}}
{{- $dns := printf "gpuslice-%s.%s.svc" $svc $ns -}}
{{- $crt := genSignedCert $dns nil (list $dns (printf "%s.cluster.local" $dns)) $days $serving -}}
{{- $_ := set $c $svc (dict "cert" $crt.Cert "key" $crt.Key "ca" $serving.Cert) -}}
{{- end -}}
{{- $crt := genSignedCert "kube-scheduler" nil nil $days $client -}}
{{- $_ := set $c "scheduler" (dict "cert" $crt.Cert "key" $crt.Key "ca" $client.Cert) -}}
{{- $_ := set . "gpusliceCerts" $c -}}
{{- end -}}
{{- end -}}
{{- toJson .gpusliceCerts -}}
{{- end -}}

{{/* Pod template annotation: with tls.source=helm a new certificate rolls the pods
(the binaries read their certificates at start only). */}}
{{- define "gpuslice.tlsChecksum" -}}
{{- if eq .Values.tls.source "helm" }}
      annotations:
        checksum/tls: {{ include "gpuslice.certs" . | sha256sum }}
{{- end }}
{{- end -}}

{{/* The webhooks' clientConfig.caBundle: the serving CA, where the chart knows it. */}}
{{- define "gpuslice.caBundle" -}}
{{- if eq .Values.tls.source "helm" }}
      caBundle: {{ (include "gpuslice.certs" . | fromJson).webhook.ca | b64enc }}
{{- else if and (eq .Values.tls.source "existing") .Values.tls.caBundle }}
      caBundle: {{ .Values.tls.caBundle }}
{{- end }}
{{- end -}}

{{/* cert-manager's CA injector fills caBundle from the webhook's Certificate. */}}
{{- define "gpuslice.caInjection" -}}
{{- if eq .Values.tls.source "certManager" }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Values.namespace }}/gpuslice-webhook
{{- end }}
{{- end -}}

{{/* An image reference, from (dict "image" <a {repository, tag} value> "key" <its
name in values.yaml>): every image of the chart. An image the operator has not
named stops the render, with the value to set. */}}
{{- define "gpuslice.image" -}}
{{- $why := "the image you pushed (docs/operator-guide.md, sections 1 and 2)" -}}
{{ required (printf "%s.repository is not set: give it the registry path of %s" .key $why) .image.repository }}:
{{- required (printf "%s.tag is not set: give it the tag of %s" .key $why) .image.tag }}
{{- end -}}
