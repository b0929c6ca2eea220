; Restart every service with a critical alert, then tell the on-call team once.
    PUSH "critical"
    CALL count_alerts
    POP R1                  ; R1 = number of critical alerts
    CMP R1, 0
    JE done                 ; nothing to do
    MOV R2, 0               ; R2 = alert index
next:
    PUSH "critical"
    PUSH R2
    CALL alert_service
    CALL restart_service
    POP R0
    INC R2
    CMP R2, R1
    JL next
    PUSH "oncall@example.com"
    PUSH "Critical alerts handled"
    PUSH "Restarted every service with a critical alert."
    CALL send_email
done:
    HLT
