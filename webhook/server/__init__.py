"""The admission server: ``routegate serve``, AdmissionReviews over HTTPS, admission control and the probes;
uses the Gate."""
